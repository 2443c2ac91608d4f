// Writes the seed corpus of the handoff header fuzz target: valid and
// invalid headers, each file named after the code CheckHeaderBytes gives it
// under kFuzzKey (ok_, out_of_range_, permission_denied_, invalid_argument_).
// Usage: handoff_header_corpus DIR  (the committed seeds are its output).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/handoff_header_fuzz_body.h"
#include "seam/handoff/crc32c.h"
#include "src/header_mac.h"

namespace seam::handoff::fuzz {
namespace {

v1::StreamState Header(uint64_t microbatch) {
  v1::StreamState header;
  header.set_microbatch_id(microbatch);
  header.set_sequence_number(3);
  header.set_epoch(2);
  header.set_state(v1::StreamState::STATE_WRITTEN);
  header.mutable_owed()->set_sum_group(v1::SUM_GROUP_NONE);
  header.set_token_count(7);
  return header;
}

v1::TensorDesc* AddTensor(v1::StreamState& header, const std::string& name, v1::DType dtype,
                          std::vector<int64_t> shape, uint64_t element_size) {
  v1::TensorDesc* desc = header.add_tensors();
  desc->set_name(name);
  desc->set_dtype(dtype);
  uint64_t bytes = element_size;
  for (int64_t d : shape) {
    desc->add_shape(d);
    bytes *= static_cast<uint64_t>(d);
  }
  desc->set_byte_size(bytes);
  const std::string payload(bytes < 4096 ? bytes : 0, '\x5a');
  desc->set_crc32c(Crc32c(payload.data(), payload.size()));
  return desc;
}

v1::StreamState TwoTensors() {
  v1::StreamState header = Header(7);
  AddTensor(header, "hidden", v1::DTYPE_F32, {7, 96}, 4);
  AddTensor(header, "residual", v1::DTYPE_BF16, {7, 96}, 2);
  return header;
}

std::string Sealed(const v1::StreamState& header, absl::string_view key = kFuzzKey) {
  return SealHeader(header, key).value();
}

bool Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

}  // namespace

int WriteCorpus(const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> seeds;
  seeds.emplace_back("ok_two_tensors", Sealed(TwoTensors()));
  seeds.emplace_back("ok_no_tensors", Sealed(Header(8)));
  {
    v1::StreamState header = TwoTensors();
    AddTensor(header, "empty", v1::DTYPE_F32, {0, 96}, 4);
    header.add_attn_dp_row_counts(7);
    header.mutable_producer()->set_exit_policy("plain");
    seeds.emplace_back("ok_empty_tensor_and_producer", Sealed(header));
  }
  seeds.emplace_back("permission_denied_no_mac", Sealed(TwoTensors(), ""));
  seeds.emplace_back("permission_denied_other_key", Sealed(TwoTensors(), "another epoch's key"));
  {
    const v1::StreamState header = TwoTensors();
    std::string bytes = Sealed(header);
    const uint32_t crc = header.tensors(1).crc32c();  // fixed32: little-endian on the wire
    const std::string crc_bytes(reinterpret_cast<const char*>(&crc), sizeof(crc));
    bytes[bytes.find(crc_bytes)] ^= 0x01;
    seeds.emplace_back("permission_denied_crc_altered_after_mac", bytes);
  }
  seeds.emplace_back("permission_denied_empty", "");
  seeds.emplace_back("out_of_range_long_header", std::string(kFuzzLimits.max_header_bytes + 1, '\0'));
  {
    v1::StreamState header = Header(7);
    AddTensor(header, "hidden", v1::DTYPE_F32, {1 << 20, 1 << 10}, 4);  // 4 GiB
    seeds.emplace_back("out_of_range_payload_bytes", Sealed(header));
  }
  seeds.emplace_back("invalid_argument_not_a_stream_state",
                     SealHeaderBytes(std::string("\xff\xff\xff\xff\x0f\x08", 6), kFuzzKey).value());
  {
    v1::StreamState header = TwoTensors();
    header.mutable_tensors(1)->set_byte_size(7 * 96 * 4);
    seeds.emplace_back("invalid_argument_byte_size_unlike_shape", Sealed(header));
  }
  {
    v1::StreamState header = TwoTensors();
    header.mutable_tensors(1)->set_name("hidden");
    seeds.emplace_back("invalid_argument_name_twice", Sealed(header));
  }
  {
    v1::StreamState header = TwoTensors();
    header.mutable_tensors(0)->set_shape(0, -7);
    seeds.emplace_back("invalid_argument_negative_dimension", Sealed(header));
  }
  {
    v1::StreamState header = TwoTensors();
    header.mutable_tensors(0)->set_shape(0, int64_t{1} << 62);
    seeds.emplace_back("invalid_argument_shape_overflows", Sealed(header));
  }
  {
    v1::StreamState header = TwoTensors();
    header.mutable_tensors(0)->set_dtype(static_cast<v1::DType>(99));
    seeds.emplace_back("invalid_argument_unknown_dtype", Sealed(header));
  }
  for (const auto& [name, bytes] : seeds) {
    if (!Write(dir, name, bytes)) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
      return 1;
    }
  }
  std::printf("wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
  return 0;
}

}  // namespace seam::handoff::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  return seam::handoff::fuzz::WriteCorpus(argv[1]);
}
