"""What one forward pass launches: custom kernels, library compute, host synchronisation, streams.

The Python side (``ModelNew.forward``, helpers it calls, Triton launches ``k[grid](...)``) is read
with ``ast``; the C++ host functions it calls are walked statement by statement, so a launch inside a
host loop counts as several launches and launches in the two arms of an ``if``/``else`` count once.
Allocations (``torch::empty``) and ``cudaMemset`` are not launches.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from .cstructure import skip_ws, stmt_end
from .scanner import Function, Source, match_close

_LAUNCH = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>;()]*(?:<[^<>;()]*>[^<>;()]*)?>)?\s*<<<")
_LAUNCH_API = re.compile(r"\bcuda(?:LaunchKernel|LaunchCooperativeKernel|LaunchKernelEx)\s*\(\s*(?:\([^)]*\)\s*)?&?\s*([A-Za-z_]\w*)")
_LIB = {
    "gemm": re.compile(r"\bcublas\w*?(?:gemm|Gemm|gemv|Gemv)\w*\s*\(|\bcublasLtMatmul\s*\(|\b(?:torch|at)::(?:matmul|mm|bmm|addmm|baddbmm|linear|einsum|addmv|mv|tensordot)\s*\(|\.(?:matmul|mm|bmm|addmm)\s*\("),
    "conv": re.compile(r"\bcudnnConvolution\w*\s*\(|\b(?:torch|at)::(?:conv[123]d|convolution|conv_transpose[123]d|cudnn_convolution\w*)\s*\("),
    "attention": re.compile(r"\b(?:torch|at)::(?:scaled_dot_product_attention|_scaled_dot_product\w*|_flash_attention\w*)\s*\("),
    "reduce": re.compile(r"\b(?:torch|at)::(?:softmax|log_softmax|sum|mean|amax|amin|layer_norm|batch_norm|group_norm|cumsum|argmax|topk|sort|max_pool2d|avg_pool2d)\s*\(|\bcudnn\w*(?:Pooling|Normalization|Softmax)\w*Forward\w*\s*\(|\.(?:sum|mean|softmax|cumsum|norm)\s*\("),
    "gather": re.compile(r"\b(?:torch|at)::(?:index_select|gather|embedding|take|scatter_add|index_add)\s*\(|\.(?:index_select|gather|scatter_add_?|index_add_?)\s*\("),
    "other": re.compile(r"\b(?:torch|at)::(?:relu|exp|tanh|sigmoid|gelu|add|mul|sub|div|cat|stack|where|clamp|pow|sqrt|abs|neg|addcmul|dropout|silu)\s*\(|\bcudnn(?:Activation|AddTensor|OpTensor)\w*\s*\(|\.(?:relu|exp|tanh|sigmoid|clone|copy_|add_?|mul_?|sub_?|div_?)\s*\("),
}
_SYNC_C = re.compile(r"\bcudaDeviceSynchronize\s*\(|\bcudaStreamSynchronize\s*\(|\bcudaMemcpy\s*\(|\.item\s*(?:<[^>]*>)?\s*\(|\.cpu\s*\(|\bcudaMalloc\s*\(|\bcudaFree\s*\(|\bcudaEventSynchronize\s*\(|\.to\s*\(\s*(?:torch::|at::)?kCPU")
_DYNAMIC_C = re.compile(r"\bnonzero\s*\(|masked_select|(?:torch|at)::unique\w*\s*\(")
_STREAM_C = re.compile(r"\bcudaStreamCreate\w*\s*\(|getStreamFromPool\s*\(")

_PY_GEMM = {"matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "tensordot", "addmv", "mv", "bilinear", "dot"}
_PY_CONV = {"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "unfold"}
_PY_ATTN = {"scaled_dot_product_attention", "multi_head_attention_forward"}
_PY_NOT_COMPUTE = {
    "empty", "empty_like", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "tensor", "as_tensor",
    "arange", "randn", "rand", "randn_like", "rand_like", "empty_strided", "from_numpy", "is_tensor", "numel",
    "manual_seed", "device", "dtype", "Size", "no_grad", "inference_mode", "broadcast_shapes",
}
_TENSOR_VIEWS = {
    "view", "reshape", "size", "dim", "contiguous", "permute", "transpose", "t", "unsqueeze", "squeeze", "expand",
    "expand_as", "flatten", "unflatten", "data_ptr", "numel", "to", "cuda", "float", "half", "bfloat16", "double",
    "stride", "is_contiguous", "view_as", "narrow", "select", "chunk", "split", "unbind", "detach", "requires_grad_",
    "type", "get_device", "element_size", "new_empty", "new_zeros", "new_ones", "storage_offset", "movedim",
}
_TENSOR_COMPUTE = {
    "index_select", "gather", "scatter", "scatter_add", "index_add", "take",
    "sum", "mean", "softmax", "log_softmax", "relu", "exp", "log", "tanh", "sigmoid", "matmul", "mm", "bmm",
    "max", "min", "amax", "amin", "norm", "cumsum", "clone", "copy_", "add", "add_", "mul", "mul_", "sub", "div",
    "pow", "sqrt", "abs", "clamp", "clamp_", "argmax", "argmin", "var", "std", "prod", "masked_fill", "gelu",
    "topk", "sort", "relu_", "fill_", "zero_", "addmm", "baddbmm", "logsumexp", "where", "neg",
}
_PY_REDUCE = {
    "sum", "mean", "softmax", "log_softmax", "max", "min", "amax", "amin", "norm", "var", "std", "cumsum", "cumprod",
    "argmax", "argmin", "logsumexp", "layer_norm", "batch_norm", "group_norm", "instance_norm", "rms_norm", "topk",
    "sort", "prod", "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "cross_entropy", "nll_loss", "mse_loss", "kl_div", "normalize",
    "cosine_similarity", "all", "any", "count_nonzero",
}
_PY_GATHER = {"index_select", "gather", "take", "embedding", "embedding_bag", "scatter", "scatter_add", "index_add",
              "index_put", "take_along_dim", "grid_sample", "one_hot"}
_PY_SYNC = {"item", "cpu", "tolist", "numpy", "synchronize"}
_PY_DYNAMIC = {"nonzero", "masked_select", "unique", "unique_consecutive", "argwhere"}
_MODULE_KIND = [
    (re.compile(r"Linear|Bilinear|LazyLinear"), "gemm"),
    (re.compile(r"Conv"), "conv"),
    (re.compile(r"MultiheadAttention|Transformer"), "attention"),
    (re.compile(r"LSTM|GRU|RNN"), "gemm"),
    (re.compile(r"Norm|Pool|Softmax|LogSoftmax"), "reduce"),
    (re.compile(r"^Embedding"), "gather"),
]


@dataclass
class Event:
    kind: str  # custom | library
    name: str
    lib: str | None
    count: int
    offset: int


@dataclass
class ForwardInfo:
    events: list[Event] = field(default_factory=list)
    found_forward: bool = False
    resolved: bool = True
    sync: list[int] = field(default_factory=list)
    dynamic: list[int] = field(default_factory=list)
    side_stream: list[int] = field(default_factory=list)

    @property
    def launches(self) -> int:
        return sum(e.count for e in self.events)

    def custom_kernels(self) -> list[str]:
        out: list[str] = []
        for e in self.events:
            if e.kind == "custom" and e.name not in out:
                out.append(e.name)
        return out

    def library(self, lib: str) -> list[int]:
        return [e.offset for e in self.events if e.kind == "library" and e.lib == lib]


# ---------------------------------------------------------------------------------------- C++ host
class _HostWalker:
    def __init__(self, src: Source, info: ForwardInfo) -> None:
        self.src = src
        self.view = src.cuda
        self.info = info
        self.hosts = {f.name: f for f in src.host_functions}
        self.kernels = {f.name for f in src.functions if f.kind == "global"}

    def function(self, fn: Function, mult: int, seen: frozenset[str]) -> list[Event]:
        if fn.name in seen or len(seen) > 6:
            return []
        seen = seen | {fn.name}
        for rx, bucket in ((_SYNC_C, self.info.sync), (_DYNAMIC_C, self.info.dynamic), (_STREAM_C, self.info.side_stream)):
            bucket.extend(fn.body_start + m.start() for m in rx.finditer(self.view, fn.body_start, fn.end))
        return self.block(fn.body_start + 1, fn.end - 1, mult, seen)

    def block(self, start: int, end: int, mult: int, seen: frozenset[str]) -> list[Event]:
        view = self.view
        events: list[Event] = []
        pos = start
        while pos < end:
            pos = skip_ws(view, pos)
            if pos >= end:
                break
            if view[pos] == "{":
                close = match_close(view, pos)
                events += self.block(pos + 1, close - 1, mult, seen)
                pos = close
                continue
            m = re.compile(r"(if|for|while|switch)\s*\(").match(view, pos)
            if m:
                close = match_close(view, m.end() - 1, "(", ")")
                body_end = min(stmt_end(view, close, end), end)
                if m.group(1) == "if":
                    then_ev = self.block(close, body_end, mult, seen)
                    nxt = skip_ws(view, body_end)
                    else_ev: list[Event] = []
                    if view.startswith("else", nxt) and nxt < end:
                        else_end = min(stmt_end(view, nxt + 4, end), end)
                        else_ev = self.block(nxt + 4, else_end, mult, seen)
                        body_end = else_end
                    events += then_ev if sum(e.count for e in then_ev) >= sum(e.count for e in else_ev) else else_ev
                elif m.group(1) in ("for", "while"):
                    events += self.block(close, body_end, 2, seen)
                else:
                    events += self.block(close, body_end, mult, seen)
                pos = body_end
                continue
            s_end = min(stmt_end(view, pos, end), end)
            if s_end <= pos:
                s_end = pos + 1
            events += self.simple(pos, s_end, mult, seen)
            pos = s_end
        return events

    def simple(self, start: int, end: int, mult: int, seen: frozenset[str]) -> list[Event]:
        text = self.view[start:end]
        events: list[Event] = []
        for m in _LAUNCH.finditer(text):
            events.append(Event("custom", m.group(1), None, mult, start + m.start()))
        for m in _LAUNCH_API.finditer(text):
            events.append(Event("custom", m.group(1), None, mult, start + m.start()))
        for lib, rx in _LIB.items():
            for m in rx.finditer(text):
                events.append(Event("library", m.group(0).strip("(. "), lib, mult, start + m.start()))
        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):  # host helpers called from here
            name = m.group(1)
            if name in self.hosts and name not in seen:
                events += self.function(self.hosts[name], mult, seen)
        return events


def host_entries(src: Source) -> list[Function]:
    """Host functions no other host function calls (the bound entry points)."""
    hosts = src.host_functions
    called = set()
    for fn in hosts:
        body = src.cuda[fn.body_start : fn.end]
        for other in hosts:
            if other is not fn and re.search(r"\b" + re.escape(other.name) + r"\s*\(", body):
                called.add(other.name)
    return [f for f in hosts if f.name not in called]


# ---------------------------------------------------------------------------------------- Python
class _PyWalker:
    def __init__(self, src: Source, info: ForwardInfo) -> None:
        self.src = src
        self.info = info
        self.host = _HostWalker(src, info)
        tree = src.py_tree
        assert tree is not None
        self.classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        self.functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        self.triton = {f.name for f in src.functions if f.kind == "triton"}
        self.modules: dict[str, str] = {}
        self.containers: dict[str, list[str]] = {}  # ModuleList / Sequential attribute -> inner module types
        self.aliases: dict[str, list[str]] = {}  # loop variable over a ModuleList -> its module types
        self.params: set[str] = set()
        for cls in self.classes.values():
            for node in ast.walk(cls):
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    tgt = node.targets[0]
                    if isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) and tgt.value.id == "self":
                        if isinstance(node.value, ast.Call):
                            ctor = ast.unparse(node.value.func)
                            if "Parameter" in ctor or ctor.startswith("torch."):
                                self.params.add(tgt.attr)
                            elif ctor.split(".")[-1] in ("ModuleList", "Sequential"):
                                inner = [ast.unparse(n.func).split(".")[-1] for n in ast.walk(node.value)
                                         if isinstance(n, ast.Call) and n is not node.value
                                         and ast.unparse(n.func).split(".")[-1] not in ("range", "ModuleList", "Sequential")]
                                self.containers[tgt.attr] = inner
                            else:
                                self.modules[tgt.attr] = ctor.split(".")[-1]
        self.starts = src._line_starts

    def offset(self, node: ast.AST) -> int:
        return self.starts[node.lineno - 1] + node.col_offset

    def run(self, cls: ast.ClassDef) -> list[Event]:
        fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if fwd is None:
            return []
        self.info.found_forward = True
        return self.func(fwd, cls, 1, frozenset())

    def func(self, fn: ast.FunctionDef, cls: ast.ClassDef | None, mult: int, seen: frozenset[str]) -> list[Event]:
        key = f"{cls.name if cls else ''}.{fn.name}"
        if key in seen or len(seen) > 6:
            return []
        seen = seen | {key}
        tensors = {a.arg for a in fn.args.args if a.arg != "self"}
        return self.stmts(fn.body, cls, mult, seen, tensors)

    def stmts(self, body: list[ast.stmt], cls, mult, seen, tensors: set[str]) -> list[Event]:
        events: list[Event] = []
        for pos, st in enumerate(body):
            if isinstance(st, ast.If) and not st.orelse and st.body and isinstance(st.body[-1], (ast.Return, ast.Raise)):
                # `if c: return a` then `return b`: the rest of the block is the else arm
                a = self.stmts(st.body, cls, mult, seen, set(tensors))
                b = self.stmts(body[pos + 1 :], cls, mult, seen, tensors)
                return events + (a if sum(e.count for e in a) >= sum(e.count for e in b) else b)
            if isinstance(st, (ast.For, ast.While, ast.AsyncFor)):
                it = getattr(st, "iter", None)
                if (isinstance(it, ast.Attribute) and isinstance(it.value, ast.Name) and it.value.id == "self"
                        and it.attr in self.containers and isinstance(st.target, ast.Name)):
                    self.aliases[st.target.id] = self.containers[it.attr]
                events += self.stmts(st.body, cls, 2, seen, tensors)
            elif isinstance(st, ast.If):
                a = self.stmts(st.body, cls, mult, seen, tensors)
                b = self.stmts(st.orelse, cls, mult, seen, tensors)
                events += a if sum(e.count for e in a) >= sum(e.count for e in b) else b
            elif isinstance(st, (ast.With, ast.Try)):
                for item in getattr(st, "items", []):
                    self.expr(item.context_expr, cls, mult, seen, tensors)
                events += self.stmts(st.body, cls, mult, seen, tensors)
            else:
                found = self.expr(st, cls, mult, seen, tensors)
                events += found
                if isinstance(st, (ast.Assign, ast.AnnAssign)):
                    value = st.value
                    targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                    is_tensor = bool(found) or self._tensorish(value, tensors)
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name):
                                (tensors.add if is_tensor else tensors.discard)(n.id)
        return events

    def _tensorish(self, node: ast.AST | None, tensors: set[str]) -> bool:
        if node is None:
            return False
        found = False
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                if n.attr in ("size", "shape", "numel", "dim", "stride"):
                    return False
                if isinstance(n.value, ast.Name) and n.value.id == "self" and n.attr in self.params:
                    found = True
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("len", "int", "float"):
                return False
            elif isinstance(n, ast.Name) and n.id in tensors:
                found = True
        return found

    def expr(self, node: ast.AST, cls, mult, seen, tensors: set[str]) -> list[Event]:
        events: list[Event] = []
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                events += self.call(sub, cls, mult, seen, tensors)
            elif isinstance(sub, ast.BinOp):
                if isinstance(sub.op, ast.MatMult):
                    events.append(Event("library", "@", "gemm", mult, self.offset(sub)))
                elif isinstance(sub.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)) and (
                        self._tensorish(sub.left, tensors) or self._tensorish(sub.right, tensors)) and not (
                        isinstance(sub.left, ast.BinOp) and self._tensorish(sub.left, tensors)):
                    events.append(Event("library", ast.unparse(sub)[:40], "other", mult, self.offset(sub)))
            elif isinstance(sub, ast.AugAssign) and self._tensorish(sub.target, tensors):
                events.append(Event("library", ast.unparse(sub)[:40], "other", mult, self.offset(sub)))
        return events

    def call(self, node: ast.Call, cls, mult, seen, tensors) -> list[Event]:
        func = node.func
        off = self.offset(node)
        if isinstance(func, ast.Subscript):
            base = func.value
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else ""
            if name in self.triton:
                return [Event("custom", name, None, mult, off)]
            return []
        dotted = ast.unparse(func)
        attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if attr in self.host.hosts:
            return self.host.function(self.host.hosts[attr], mult, frozenset())
        if attr in _PY_SYNC and (isinstance(func, ast.Attribute)):
            self.info.sync.append(off)
            return []
        if attr in _PY_DYNAMIC or (dotted in ("torch.where",) and len(node.args) == 1):
            self.info.dynamic.append(off)
        if dotted in ("torch.cuda.Stream", "torch.cuda.stream"):
            self.info.side_stream.append(off)
            return []
        if isinstance(func, ast.Name):
            if func.id in self.aliases:
                out: list[Event] = []
                for ctor in self.aliases[func.id]:
                    out += self.module_events(ctor, mult, seen, off)
                return out
            if func.id in self.functions:
                return self.func(self.functions[func.id], None, mult, seen)
            return []
        if not isinstance(func, ast.Attribute):
            return []
        value = func.value
        if isinstance(value, ast.Name) and value.id == "self":
            if cls is not None:
                method = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == attr), None)
                if method is not None:
                    return self.func(method, cls, mult, seen)
            if attr in self.modules:
                return self.module_events(self.modules[attr], mult, seen, off)
            if attr in self.containers:
                out = []
                for ctor in self.containers[attr]:
                    out += self.module_events(ctor, mult, seen, off)
                return out
            return []
        head = dotted.split(".")[0]
        if head in ("torch", "F", "nn", "functional") or dotted.startswith("torch.nn.functional"):
            if attr in _PY_NOT_COMPUTE or dotted.startswith(("torch.cuda", "torch.backends", "torch.utils")):
                return []
            kind = ("gemm" if attr in _PY_GEMM else "conv" if attr in _PY_CONV else "attention" if attr in _PY_ATTN
                    else "reduce" if attr in _PY_REDUCE else "gather" if attr in _PY_GATHER else "other")
            if attr in _TENSOR_VIEWS:
                return []
            return [Event("library", dotted, kind, mult, off)]
        if attr in _TENSOR_COMPUTE and head not in ("math", "np", "numpy", "triton", "tl", "os", "self"):
            kind = "gemm" if attr in _PY_GEMM else "reduce" if attr in _PY_REDUCE else "gather" if attr in _PY_GATHER else "other"
            return [Event("library", dotted, kind, mult, off)]
        return []

    def module_events(self, ctor: str, mult: int, seen: frozenset[str], off: int) -> list[Event]:
        if ctor in self.classes:
            return self.run_nested(self.classes[ctor], mult, seen)
        for rx, kind in _MODULE_KIND:
            if rx.search(ctor):
                return [Event("library", ctor, kind, mult, off)]
        if re.match(r"(Identity|Dropout|Flatten|Unflatten)$", ctor):
            return []
        return [Event("library", ctor, "other", mult, off)]

    def run_nested(self, cls: ast.ClassDef, mult: int, seen: frozenset[str]) -> list[Event]:
        fwd = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        return self.func(fwd, cls, mult, seen) if fwd else []


def analyse_forward(src: Source) -> ForwardInfo:
    info = ForwardInfo()
    if src.py_tree is not None:
        walker = _PyWalker(src, info)
        model = walker.classes.get("ModelNew") or next(
            (c for c in walker.classes.values() if any(isinstance(n, ast.FunctionDef) and n.name == "forward"
                                                        for n in c.body)), None)
        if model is not None:
            info.events = walker.run(model)
    if not any(e.kind == "custom" for e in info.events) and src.kernels:
        # No forward, or a forward we could not follow to the kernels: use the host entry points.
        info.resolved = info.found_forward and not src.kernels
        host = _HostWalker(src, info)
        extra: list[Event] = []
        for fn in host_entries(src):
            extra += host.function(fn, 1, frozenset())
        if not any(e.kind == "custom" for e in extra):
            extra += [Event("custom", k.name, None, 1, k.start) for k in src.kernels]
        info.events += extra
    return info
