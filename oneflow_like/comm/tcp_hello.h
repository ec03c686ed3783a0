// The hello that opens every TCP transport connection, in both directions: the dialing rank
// sends its hello, the accepting rank checks it and answers with its own (mutual
// authentication by the job token).
//   u32 magic "OLTH" | u32 version | i32 world size | i32 rank | u32 token length | token
// all little-endian (core/fixed_codec.h); the token is at most kMaxHelloTokenBytes.
//
//   std::string bytes = EncodeHello({/*world_size=*/4, /*rank=*/1, "secret"});
//   PeekHello(bytes.substr(0, 3));        // 0: a valid prefix, more bytes needed
//   PeekHello(bytes);                     // bytes.size(): complete
//   PeekHello("GET / HTTP/1.1");          // InvalidArgument: not a hello (wrong magic)
//   ASSIGN_OR_RETURN(Hello hello, DecodeHello(bytes));
//   RETURN_IF_ERROR(CheckHello(hello, "secret", /*world_size=*/4));
//
// Errors: InvalidArgument for bytes that are not a hello (checked as early as the first byte)
// or a token length over the bound; PermissionDenied for a wrong token; InvalidArgument for a
// world size mismatch or a rank outside the world. Pure functions; thread-safe.
#ifndef ONEFLOW_LIKE_COMM_TCP_HELLO_H_
#define ONEFLOW_LIKE_COMM_TCP_HELLO_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace comm {

constexpr size_t kHelloFixedBytes = 4 * 5;
constexpr size_t kMaxHelloTokenBytes = 4096;

struct Hello {
  int32_t world_size = 0;
  int32_t rank = -1;
  std::string token;
};

std::string EncodeHello(const Hello& hello);
// The total size of the hello starting `received` once its length is known, 0 while more bytes
// are needed; an error as soon as the bytes cannot be a hello.
absl::StatusOr<size_t> PeekHello(absl::string_view received);
// Decodes exactly one hello (as sized by PeekHello).
absl::StatusOr<Hello> DecodeHello(absl::string_view bytes);
// Checks `hello` against this job (the token compare takes the same time wherever it differs).
absl::Status CheckHello(const Hello& hello, absl::string_view job_token, int32_t world_size);

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_TCP_HELLO_H_
