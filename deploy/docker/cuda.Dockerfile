# syntax=docker/dockerfile:1
# seam CUDA image: the same three binaries built with the CUDA path (sm_90,
# NCCL) on NVIDIA's CUDA 13.0 images for Ubuntu 24.04.
# Build from the repository root:
#   docker build -f deploy/docker/cuda.Dockerfile -t seam:cuda .
# Base tags: nvidia/cuda:13.0.0-devel-ubuntu24.04 (nvcc, NCCL headers) for
# the build stage and nvidia/cuda:13.0.0-runtime-ubuntu24.04 (cudart,
# cuBLAS, NCCL) for the runtime stage. The build stage runs the same
# scripts/install-deps.sh as the CPU image and CI. Ubuntu's runtime package
# names carry t64 suffixes, so the runtime stage installs the packages that
# own the libraries the binaries actually load (listed by ldd + dpkg -S in
# the build stage) instead of a hand-written list.

ARG CUDA_TAG=13.0.0
ARG UBUNTU=ubuntu24.04

FROM nvidia/cuda:${CUDA_TAG}-devel-${UBUNTU} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSEAM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DSEAM_BUILD_TESTS=OFF \
 && cmake --build /build --target seam-stage seam-coordinator seam \
 && install -D -m 0755 -t /out/usr/local/bin \
      /build/bin/seam-stage /build/bin/seam-coordinator /build/bin/seam \
 && bash deploy/docker/runtime-packages.sh /out/usr/local/bin/* > /out/runtime-packages.txt \
 && cat /out/runtime-packages.txt

ARG CUDA_TAG
ARG UBUNTU
FROM nvidia/cuda:${CUDA_TAG}-runtime-${UBUNTU} AS runtime
COPY --from=build /out/runtime-packages.txt /tmp/runtime-packages.txt
# hadolint ignore=DL3008,SC2046
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      $(cat /tmp/runtime-packages.txt) \
 && rm -rf /var/lib/apt/lists/* /tmp/runtime-packages.txt \
 && groupadd --system --gid 10001 seam \
 && useradd --system --uid 10001 --gid seam --home-dir /home/seam --create-home --shell /usr/sbin/nologin seam
COPY --from=build /out/usr/local/bin/ /usr/local/bin/
ENV UCX_TLS=tcp \
    UCX_TCP_PORT_RANGE=40000-40015 \
    NCCL_NVLS_ENABLE=0
USER 10001:10001
WORKDIR /home/seam
EXPOSE 50050 50051 40000-40015
ENTRYPOINT ["/usr/local/bin/seam-stage"]
CMD ["--listen", "0.0.0.0:50051", "--ucx-mode", "tcp"]
