# syntax=docker/dockerfile:1
# seam CPU image: seam-stage, seam-coordinator and the seam CLI on Debian 12.
# Build from the repository root:
#   docker build -f deploy/docker/cpu.Dockerfile -t seam:cpu .
# The build stage installs packages with scripts/install-deps.sh, the same
# script CI runs; the runtime stage carries only the shared libraries the
# three binaries load (the non -dev packages of that list).

FROM debian:12-slim AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DSEAM_CUDA=OFF -DSEAM_BUILD_TESTS=OFF \
 && cmake --build /build --target seam-stage seam-coordinator seam \
 && install -D -m 0755 -t /out/usr/local/bin \
      /build/bin/seam-stage /build/bin/seam-coordinator /build/bin/seam \
 && bash deploy/docker/check_runtime_packages.sh deploy/docker/cpu.Dockerfile /out/usr/local/bin/*

FROM debian:12-slim AS runtime
# Runtime libraries of the build packages: every library the three binaries
# load directly is named here (the build stage checks it with
# check_runtime_packages.sh: ldd + dpkg -S against this list and its
# dependencies); their own dependencies (libgrpc29, libre2-9, libssl3, ...)
# follow through apt.
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      libgrpc++1.51=1.51.* \
      libprotobuf32=3.21.* \
      libabsl20220623=20220623.* \
      libucx0=1.13.* \
      libgloo0=0.0~git20220518.* \
      libopenblas0-pthread=0.3.21* \
      libspdlog1.10=1:1.10.* \
      libfmt9=9.1.* \
      libprometheus-cpp-core1.0=1.0.* \
      libmicrohttpd12=0.9.75* \
      libgnutls30=3.7.9* \
      libutf8proc2=2.8.* \
      libpcre2-8-0=10.42* \
      libcpp-httplib0.11=0.11.* \
      libbrotli1=1.0.* \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 seam \
 && useradd --system --uid 10001 --gid seam --home-dir /home/seam --create-home --shell /usr/sbin/nologin seam
COPY --from=build /out/ /
ENV UCX_TLS=tcp \
    UCX_TCP_PORT_RANGE=40000-40015
USER 10001:10001
WORKDIR /home/seam
EXPOSE 50050 50051 40000-40015
ENTRYPOINT ["/usr/local/bin/seam-stage"]
CMD ["--listen", "0.0.0.0:50051", "--ucx-mode", "tcp"]
