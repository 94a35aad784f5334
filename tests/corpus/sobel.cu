#include <cuda_runtime.h>

// 3x3 Sobel magnitude on a grayscale image, global reads, borders skipped.
__global__ void sobel_kernel(const unsigned char* __restrict__ img, float* __restrict__ mag, int width, int height) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= width - 1 || y >= height - 1) return;
    float gx = -img[(y - 1) * width + (x - 1)] + img[(y - 1) * width + (x + 1)]
               - 2 * img[y * width + (x - 1)] + 2 * img[y * width + (x + 1)]
               - img[(y + 1) * width + (x - 1)] + img[(y + 1) * width + (x + 1)];
    float gy = -img[(y - 1) * width + (x - 1)] - 2 * img[(y - 1) * width + x] - img[(y - 1) * width + (x + 1)]
               + img[(y + 1) * width + (x - 1)] + 2 * img[(y + 1) * width + x] + img[(y + 1) * width + (x + 1)];
    mag[y * width + x] = sqrtf(gx * gx + gy * gy);
}

void sobel(const unsigned char* img, float* mag, int width, int height, cudaStream_t stream) {
    dim3 block(16, 16);
    dim3 grid((width + 15) / 16, (height + 15) / 16);
    sobel_kernel<<<grid, block, 0, stream>>>(img, mag, width, height);
}
