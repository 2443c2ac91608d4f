# Every third-party package seam uses, all from Debian (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(Protobuf MODULE REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(Gloo CONFIG REQUIRED)
find_package(ucx CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(GTest CONFIG REQUIRED)

# OpenBLAS: Debian ships a CMake config for the pthread flavour.
find_package(PkgConfig REQUIRED)
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
