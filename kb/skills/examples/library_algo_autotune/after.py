import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CPP_SRC = r"""
#include <torch/extension.h>
torch::Tensor split3(torch::Tensor src, int64_t mode, double scale);
torch::Tensor scale_copy(torch::Tensor src, double scale);
torch::Tensor gemm_bias(torch::Tensor x, torch::Tensor wcat, torch::Tensor bias);
"""

_CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAException.h>
#include <cublas_v2.h>
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <climits>
#include <cstdint>
#include <vector>
#include <math.h>

#define CHECK_CUDA_F32(t) TORCH_CHECK((t).is_cuda() && (t).scalar_type() == at::kFloat, #t " must be a float32 CUDA tensor")

// ------------------------------------------------------------------------------------------
// Error-compensated TF32: v = hi + lo, hi exactly representable in TF32 (top 10 mantissa bits),
// lo = v - hi exact in fp32.  A*B ~= Ahi*Bhi + Ahi*Blo + Alo*Bhi, done as ONE TF32 GEMM over
// a 3x longer K: activations laid out [hi | hi | lo], weights [hi | lo | hi].
// The task epilogue  out = y*s + y,  y = xW^T + b  is folded into the GEMM:
//   weights and bias are pre-scaled by (1+s) (cached), and cuBLASLt adds the bias in its epilogue.
// ------------------------------------------------------------------------------------------
__device__ __forceinline__ float tf32_hi(float x) {
    return __uint_as_float(__float_as_uint(x) & 0xFFFFE000u);
}

static inline unsigned int grid_for(long long n, int threads) {
    long long b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65536LL) b = 65536LL;
    return (unsigned int)b;
}

static inline bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// mode 0: [hi | hi | lo]   (activations)     mode 1: [hi | lo | hi]   (weights)
__global__ void split3_vec4_kernel(const float4* __restrict__ src, float4* __restrict__ dst,
                                   long long rows, long long K4, int mode, float scale) {
    const long long total = rows * K4;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long r = i / K4;
        const long long c = i - r * K4;
        float4 v = src[i];
        v.x *= scale; v.y *= scale; v.z *= scale; v.w *= scale;
        float4 hi, lo;
        hi.x = tf32_hi(v.x); lo.x = v.x - hi.x;
        hi.y = tf32_hi(v.y); lo.y = v.y - hi.y;
        hi.z = tf32_hi(v.z); lo.z = v.z - hi.z;
        hi.w = tf32_hi(v.w); lo.w = v.w - hi.w;
        float4* d = dst + r * 3 * K4 + c;
        d[0] = hi;
        if (mode == 0) { d[K4] = hi; d[2 * K4] = lo; }
        else           { d[K4] = lo; d[2 * K4] = hi; }
    }
}

__global__ void split3_scalar_kernel(const float* __restrict__ src, float* __restrict__ dst,
                                     long long rows, long long K, int mode, float scale) {
    const long long total = rows * K;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long r = i / K;
        const long long c = i - r * K;
        const float v = src[i] * scale;
        const float hi = tf32_hi(v);
        const float lo = v - hi;
        float* d = dst + r * 3 * K + c;
        d[0] = hi;
        if (mode == 0) { d[K] = hi; d[2 * K] = lo; }
        else           { d[K] = lo; d[2 * K] = hi; }
    }
}

static void split3_launch(const float* src, float* dst, long long rows, long long K, int mode, float scale) {
    if (rows <= 0 || K <= 0) return;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if ((K % 4 == 0) && aligned16(src) && aligned16(dst)) {
        const long long total = rows * (K / 4);
        split3_vec4_kernel<<<grid_for(total, 256), 256, 0, stream>>>(
            reinterpret_cast<const float4*>(src), reinterpret_cast<float4*>(dst), rows, K / 4, mode, scale);
    } else {
        const long long total = rows * K;
        split3_scalar_kernel<<<grid_for(total, 256), 256, 0, stream>>>(src, dst, rows, K, mode, scale);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// [R, d1, ...] -> [R, 3*d1, ...]; every row of numel/R elements becomes three blocks (values * scale).
torch::Tensor split3(torch::Tensor src, int64_t mode, double scale) {
    CHECK_CUDA_F32(src);
    TORCH_CHECK(src.dim() >= 2, "split3 expects at least 2 dims");
    const at::cuda::OptionalCUDAGuard guard(device_of(src));
    auto s = src.contiguous();
    std::vector<int64_t> sizes = s.sizes().vec();
    const long long rows = sizes[0];
    const long long K = rows > 0 ? s.numel() / rows : 0;
    sizes[1] *= 3;
    auto out = torch::empty(sizes, s.options());
    split3_launch(s.data_ptr<float>(), out.data_ptr<float>(), rows, K, (int)mode, (float)scale);
    return out;
}

__global__ void scale_copy_kernel(const float* __restrict__ src, float* __restrict__ dst, long long n, float scale) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i] * scale;
}

torch::Tensor scale_copy(torch::Tensor src, double scale) {
    CHECK_CUDA_F32(src);
    const at::cuda::OptionalCUDAGuard guard(device_of(src));
    auto s = src.contiguous();
    auto out = torch::empty_like(s);
    const long long n = s.numel();
    if (n > 0) {
        scale_copy_kernel<<<grid_for(n, 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
            s.data_ptr<float>(), out.data_ptr<float>(), n, (float)scale);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}

// ---------------------------- fallback: cublasGemmEx + bias kernel --------------------------
// C[M,N] = A[M,Kc] * B[N,Kc]^T, row-major fp32 operands, TF32 tensor cores, fp32 accumulation.
static void gemm_tf32_nt(const float* A, const float* B, float* C, long long M, long long N, long long Kc) {
    if (M <= 0 || N <= 0) return;
    TORCH_CHECK(M <= INT_MAX && N <= INT_MAX && Kc <= INT_MAX, "GEMM dimension too large");
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();   // bound to the current stream
    cublasPointerMode_t prev_ptr;
    TORCH_CHECK(cublasGetPointerMode(handle, &prev_ptr) == CUBLAS_STATUS_SUCCESS, "cublasGetPointerMode failed");
    cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST);
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t st = cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N,
                                     (int)N, (int)M, (int)Kc,
                                     &alpha,
                                     B, CUDA_R_32F, (int)Kc,
                                     A, CUDA_R_32F, (int)Kc,
                                     &beta,
                                     C, CUDA_R_32F, (int)N,
                                     CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    cublasSetPointerMode(handle, prev_ptr);
    TORCH_CHECK(st == CUBLAS_STATUS_SUCCESS, "cublasGemmEx (TF32) failed with status ", (int)st);
}

__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ b, long long M, long long N) {
    const long long total = M * N;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += step) {
        const long long n = i % N;
        y[i] = y[i] + __ldg(&b[n]);
    }
}

// ---------------------------- cuBLASLt path with fused bias epilogue ------------------------
// The algorithm is autotuned once per (M, N, Kc, device): up to kMaxCands heuristic candidates
// (no split-K / reduction schemes, so results stay deterministic) are timed on the real operands.
static const int kMaxCands = 16;

struct LtPlan {
    bool init = false;
    bool ok = false;
    bool tuned = false;
    long long M = -1, N = -1, Kc = -1;
    int device = -1;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
    cublasLtMatmulAlgo_t algo;
    size_t ws = 0;
    int ncand = 0;
    cublasLtMatmulHeuristicResult_t cand[kMaxCands];
};
static LtPlan g_plan;
static cublasLtHandle_t g_lt = nullptr;
static const size_t kLtWsBytes = (size_t)64 << 20;

static void lt_release(LtPlan& p) {
    if (p.op) { cublasLtMatmulDescDestroy(p.op); p.op = nullptr; }
    if (p.la) { cublasLtMatrixLayoutDestroy(p.la); p.la = nullptr; }
    if (p.lb) { cublasLtMatrixLayoutDestroy(p.lb); p.lb = nullptr; }
    if (p.lc) { cublasLtMatrixLayoutDestroy(p.lc); p.lc = nullptr; }
    p.ok = false;
    p.init = false;
    p.tuned = false;
    p.ncand = 0;
    p.ws = 0;
}

#define LT_TRY(expr) do { if ((expr) != CUBLAS_STATUS_SUCCESS) return false; } while (0)

static bool lt_prepare(long long M, long long N, long long Kc, int device, const float* bias_ptr) {
    if (g_lt == nullptr) {
        if (cublasLtCreate(&g_lt) != CUBLAS_STATUS_SUCCESS) { g_lt = nullptr; return false; }
    }
    if (g_plan.init && g_plan.M == M && g_plan.N == N && g_plan.Kc == Kc && g_plan.device == device) return g_plan.ok;
    lt_release(g_plan);
    g_plan.init = true;
    g_plan.ok = false;
    g_plan.M = M; g_plan.N = N; g_plan.Kc = Kc; g_plan.device = device;

    LT_TRY(cublasLtMatmulDescCreate(&g_plan.op, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(g_plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT_TRY(cublasLtMatmulDescSetAttribute(g_plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    LT_TRY(cublasLtMatmulDescSetAttribute(g_plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    const void* bp = bias_ptr;
    LT_TRY(cublasLtMatmulDescSetAttribute(g_plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof(bp)));
    // column-major view: D(N x M) = W(Kc x N)^T * X(Kc x M)
    LT_TRY(cublasLtMatrixLayoutCreate(&g_plan.la, CUDA_R_32F, (uint64_t)Kc, (uint64_t)N, (int64_t)Kc));
    LT_TRY(cublasLtMatrixLayoutCreate(&g_plan.lb, CUDA_R_32F, (uint64_t)Kc, (uint64_t)M, (int64_t)Kc));
    LT_TRY(cublasLtMatrixLayoutCreate(&g_plan.lc, CUDA_R_32F, (uint64_t)N, (uint64_t)M, (int64_t)N));

    cublasLtMatmulPreference_t pref = nullptr;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t wsb = (uint64_t)kLtWsBytes;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
    if (st == CUBLAS_STATUS_SUCCESS) {
        // no split-K reduction: single-kernel accumulation, bitwise deterministic
        uint32_t red = (uint32_t)CUBLASLT_REDUCTION_SCHEME_NONE;
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &red, sizeof(red));
    }
    cublasLtMatmulHeuristicResult_t res[kMaxCands];
    int nres = 0;
    if (st == CUBLAS_STATUS_SUCCESS) {
        st = cublasLtMatmulAlgoGetHeuristic(g_lt, g_plan.op, g_plan.la, g_plan.lb, g_plan.lc, g_plan.lc,
                                            pref, kMaxCands, res, &nres);
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) return false;
    int nc = 0;
    for (int i = 0; i < nres && i < kMaxCands; ++i) {
        if (res[i].state == CUBLAS_STATUS_SUCCESS && res[i].workspaceSize <= kLtWsBytes) g_plan.cand[nc++] = res[i];
    }
    if (nc < 1) return false;
    g_plan.ncand = nc;
    g_plan.algo = g_plan.cand[0].algo;
    g_plan.ws = g_plan.cand[0].workspaceSize;
    g_plan.tuned = (nc == 1);
    g_plan.ok = true;
    return true;
}

// One-time timing of every candidate on the real operands (writes yp; the caller recomputes it).
static void lt_autotune(const float* wptr, const float* xptr, float* yp, cudaStream_t stream,
                        const torch::TensorOptions& opts) {
    size_t maxws = 1;
    for (int i = 0; i < g_plan.ncand; ++i)
        if (g_plan.cand[i].workspaceSize > maxws) maxws = g_plan.cand[i].workspaceSize;
    auto wst = torch::empty({(long long)maxws}, opts.dtype(at::kByte));
    cudaEvent_t e0 = nullptr, e1 = nullptr;
    if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) {
        if (e0) cudaEventDestroy(e0);
        (void)cudaGetLastError();
        g_plan.tuned = true;          // keep the first heuristic
        return;
    }
    const float alpha = 1.0f, beta = 0.0f;
    float best = INFINITY;
    int bi = -1;
    for (int i = 0; i < g_plan.ncand; ++i) {
        const cublasLtMatmulAlgo_t* al = &g_plan.cand[i].algo;
        const size_t wsz = g_plan.cand[i].workspaceSize;
        // warm-up
        cublasStatus_t st = cublasLtMatmul(g_lt, g_plan.op, &alpha, wptr, g_plan.la, xptr, g_plan.lb,
                                           &beta, yp, g_plan.lc, yp, g_plan.lc, al, wst.data_ptr(), wsz, stream);
        if (st != CUBLAS_STATUS_SUCCESS) continue;
        if (cudaEventRecord(e0, stream) != cudaSuccess) continue;
        bool fail = false;
        for (int r = 0; r < 3 && !fail; ++r) {
            st = cublasLtMatmul(g_lt, g_plan.op, &alpha, wptr, g_plan.la, xptr, g_plan.lb,
                                &beta, yp, g_plan.lc, yp, g_plan.lc, al, wst.data_ptr(), wsz, stream);
            fail = (st != CUBLAS_STATUS_SUCCESS);
        }
        if (cudaEventRecord(e1, stream) != cudaSuccess) continue;
        if (cudaEventSynchronize(e1) != cudaSuccess) continue;
        if (fail) continue;
        float ms = 0.0f;
        if (cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess) continue;
        if (ms < best) { best = ms; bi = i; }
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    (void)cudaGetLastError();        // clear any non-sticky error from a rejected candidate
    if (bi >= 0) {
        g_plan.algo = g_plan.cand[bi].algo;
        g_plan.ws = g_plan.cand[bi].workspaceSize;
    } else {
        g_plan.ok = false;            // nothing ran: use the cublasGemmEx fallback
    }
    g_plan.tuned = true;
}

// out[M,N] = x W'^T + b'  with W' = (1+s) W (given split as wcat) and b' = (1+s) b.
torch::Tensor gemm_bias(torch::Tensor x, torch::Tensor wcat, torch::Tensor bias) {
    CHECK_CUDA_F32(x); CHECK_CUDA_F32(wcat); CHECK_CUDA_F32(bias);
    TORCH_CHECK(x.dim() == 2, "x must be 2-D");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto xc = x.contiguous();
    auto wc = wcat.contiguous();
    auto bc = bias.contiguous();
    const long long M = xc.size(0), K = xc.size(1), N = wc.size(0);
    TORCH_CHECK(wc.dim() == 2 && wc.size(1) == 3 * K, "split weight / input mismatch");
    TORCH_CHECK(bc.numel() == N, "bias size mismatch");
    auto out = torch::empty({M, N}, xc.options());
    if (M == 0 || N == 0) return out;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    float* yp = out.data_ptr<float>();
    const float* bp = bc.data_ptr<float>();
    if (K == 0) {
        out.zero_();
        add_bias_kernel<<<grid_for(M * N, 256), 256, 0, stream>>>(yp, bp, M, N);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
        return out;
    }
    auto xcat = torch::empty({M, 3 * K}, xc.options());
    split3_launch(xc.data_ptr<float>(), xcat.data_ptr<float>(), M, K, 0, 1.0f);
    const long long Kc = 3 * K;

    bool done = false;
    const bool aligned = aligned16(xcat.data_ptr<float>()) && aligned16(wc.data_ptr<float>()) &&
                         aligned16(yp) && aligned16(bp);
    if (aligned && lt_prepare(M, N, Kc, (int)xc.get_device(), bp)) {
        const void* bptr = bp;
        if (cublasLtMatmulDescSetAttribute(g_plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bptr, sizeof(bptr))
                == CUBLAS_STATUS_SUCCESS) {
            if (!g_plan.tuned) lt_autotune(wc.data_ptr<float>(), xcat.data_ptr<float>(), yp, stream, xc.options());
            if (g_plan.ok) {
                auto ws = torch::empty({(long long)(g_plan.ws > 0 ? g_plan.ws : 1)}, xc.options().dtype(at::kByte));
                const float alpha = 1.0f, beta = 0.0f;
                cublasStatus_t st = cublasLtMatmul(g_lt, g_plan.op, &alpha,
                                                   wc.data_ptr<float>(), g_plan.la,
                                                   xcat.data_ptr<float>(), g_plan.lb,
                                                   &beta, yp, g_plan.lc, yp, g_plan.lc,
                                                   &g_plan.algo, ws.data_ptr(), g_plan.ws, stream);
                done = (st == CUBLAS_STATUS_SUCCESS);
            }
        }
    }
    if (!done) {
        gemm_tf32_nt(xcat.data_ptr<float>(), wc.data_ptr<float>(), yp, M, N, Kc);
        add_bias_kernel<<<grid_for(M * N, 256), 256, 0, stream>>>(yp, bp, M, N);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return out;
}
"""

_ext = load_inline(
    name="gemm_scale_residual_3xtf32_lt_tuned_v3",
    cpp_sources=_CPP_SRC,
    cuda_sources=_CUDA_SRC,
    functions=["split3", "scale_copy", "gemm_bias"],
    extra_cuda_cflags=["-O3"],
    extra_ldflags=["-lcublas", "-lcublasLt"],
    verbose=False,
)


def _param_key(p):
    try:
        ver = p._version
    except Exception:
        return None
    return (p.data_ptr(), ver, tuple(p.shape), p.device)


class ModelNew(nn.Module):
    """Linear -> *s -> + residual, as a 3xTF32 (fp32-accurate) tensor-core cuBLASLt GEMM whose epilogue
    adds the (1+s)-scaled bias; the weights are split and pre-scaled by (1+s) once (cached)."""

    def __init__(self, in_features, out_features, scaling_factor):
        super(ModelNew, self).__init__()
        self.matmul = nn.Linear(in_features, out_features)
        self.scaling_factor = scaling_factor
        self._wcat = None
        self._bscaled = None
        self._key = None

    def _prepared(self):
        w = self.matmul.weight
        b = self.matmul.bias
        s = float(self.scaling_factor)
        key = (_param_key(w), _param_key(b), s)
        if key[0] is None or key[1] is None or self._wcat is None or key != self._key:
            g = 1.0 + s
            with torch.no_grad():
                self._wcat = _ext.split3(w.detach(), 1, g)      # [hi | lo | hi] of (1+s) W along K
                self._bscaled = _ext.scale_copy(b.detach(), g)  # (1+s) b
            self._key = key
        return self._wcat, self._bscaled

    def forward(self, x):
        wcat, bsc = self._prepared()
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        out = _ext.gemm_bias(x2, wcat, bsc)
        return out.view(*lead, out.shape[-1])
