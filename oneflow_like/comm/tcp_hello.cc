#include "oneflow_like/comm/tcp_hello.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "oneflow_like/core/fixed_codec.h"

namespace oneflow_like {
namespace comm {
namespace {

constexpr uint32_t kHelloMagic = 0x48544c4f;  // "OLTH" little-endian
constexpr uint32_t kHelloVersion = 1;

std::string MagicAndVersion() {
  std::string bytes;
  AppendFixed<uint32_t>(&bytes, kHelloMagic);
  AppendFixed<uint32_t>(&bytes, kHelloVersion);
  return bytes;
}

}  // namespace

std::string EncodeHello(const Hello& hello) {
  std::string bytes = MagicAndVersion();
  AppendFixed<int32_t>(&bytes, hello.world_size);
  AppendFixed<int32_t>(&bytes, hello.rank);
  AppendFixed<uint32_t>(&bytes, static_cast<uint32_t>(hello.token.size()));
  bytes.append(hello.token);
  return bytes;
}

absl::StatusOr<size_t> PeekHello(absl::string_view received) {
  const std::string expected = MagicAndVersion();
  const size_t prefix = std::min(received.size(), expected.size());
  if (received.substr(0, prefix) != absl::string_view(expected).substr(0, prefix)) {
    return absl::InvalidArgumentError("not a transport hello (wrong magic or version in the first bytes)");
  }
  if (received.size() < kHelloFixedBytes) return size_t{0};
  size_t pos = kHelloFixedBytes - 4;
  const uint32_t token_bytes = ReadFixed<uint32_t>(received, &pos);
  if (token_bytes > kMaxHelloTokenBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("hello declares a ", token_bytes, "-byte job token; the limit is ", kMaxHelloTokenBytes));
  }
  return kHelloFixedBytes + token_bytes;
}

absl::StatusOr<Hello> DecodeHello(absl::string_view bytes) {
  ASSIGN_OR_RETURN(size_t size, PeekHello(bytes));
  if (size == 0 || size != bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat("hello of ", bytes.size(), " bytes, expected ", size));
  }
  size_t pos = 8;
  Hello hello;
  hello.world_size = ReadFixed<int32_t>(bytes, &pos);
  hello.rank = ReadFixed<int32_t>(bytes, &pos);
  hello.token = std::string(bytes.substr(kHelloFixedBytes));
  return hello;
}

absl::Status CheckHello(const Hello& hello, absl::string_view job_token, int32_t world_size) {
  // Constant-time compare: the time taken does not reveal how much of the token was right.
  // (Only the length may leak, which a token's strength does not rest on.)
  unsigned char difference = hello.token.size() == job_token.size() ? 0 : 1;
  if (difference == 0) {
    for (size_t i = 0; i < job_token.size(); ++i) difference |= static_cast<unsigned char>(hello.token[i] ^ job_token[i]);
  }
  if (difference != 0) return absl::PermissionDeniedError("wrong job token");
  if (hello.world_size != world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", hello.world_size, " does not match this job's ", world_size));
  }
  if (hello.rank < 0 || hello.rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", hello.rank, " is outside the world [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace comm
}  // namespace oneflow_like
