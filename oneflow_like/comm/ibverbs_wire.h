// The verbs-free parts of the ibverbs transport (ibverbs_transport.h), unit-testable on any
// machine: the endpoint info ranks exchange through the control plane, the 32-bit immediate
// that accompanies each RDMA write, and the per-peer reassembly of fragments into checked Frames.
//
//   IbverbsEndpointInfo info = ...;                       // filled by IbverbsTransport
//   std::string text = info.Encode();                     // "ibverbs-endpoint-v1 from=0 to=1 ..."
//   ASSIGN_OR_RETURN(IbverbsEndpointInfo back, IbverbsEndpointInfo::Decode(text));
//
//   uint32_t imm = IbverbsImmediate::Data(/*length=*/4096, /*last=*/false);
//   IbverbsImmediate::Parse(imm)  // {credit = false, last = false, value = 4096}
//
//   FrameAssembler assembler(/*from=*/Rank(0), /*to=*/Rank(1), /*max_payload_bytes=*/1 << 20);
//   assembler.Add(first_fragment, /*last=*/false);        // -> nullopt
//   assembler.Add(second_fragment, /*last=*/true);        // -> the Frame, sequence 0
//
// Errors: Decode is InvalidArgument naming the first bad field; FrameAssembler::Add is
// InvalidArgument for bytes that are not a frame and DataLoss for an oversized, misaddressed or
// out-of-sequence frame. Never a crash.
// Thread-safety: pure values and functions; a FrameAssembler belongs to one thread.
#ifndef ONEFLOW_LIKE_COMM_IBVERBS_WIRE_H_
#define ONEFLOW_LIKE_COMM_IBVERBS_WIRE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "oneflow_like/comm/transport.h"

namespace oneflow_like {
namespace comm {

// What one rank's QP for one peer tells that peer, as a single line of text:
//   "ibverbs-endpoint-v1 from=0 to=1 lid=3 gid=<32 hex> mtu=5 qpn=291 psn=4660 ring=140737 rkey=7
//    slot_bytes=4194304 slots=8"
struct IbverbsEndpointInfo {
  int32_t from_rank = -1;               // owner of the QP and of the ring
  int32_t to_rank = -1;                 // the peer this QP connects to
  uint16_t lid = 0;                     // port LID (0 on RoCE)
  std::array<uint8_t, 16> gid{};        // port GID at gid_index
  uint8_t mtu = 0;                      // active port MTU as enum ibv_mtu: 1 = 256 .. 5 = 4096
  uint32_t qp_number = 0;               // 24 bits
  uint32_t packet_sequence_number = 0;  // initial PSN, 24 bits
  uint64_t ring_address = 0;            // the ring from_rank receives from to_rank in
  uint32_t ring_rkey = 0;
  int64_t slot_bytes = 0;
  int32_t slots = 0;

  std::string Encode() const;
  // InvalidArgument naming the first bad field (garbage, truncation, out-of-range numbers).
  static absl::StatusOr<IbverbsEndpointInfo> Decode(absl::string_view text);
  bool operator==(const IbverbsEndpointInfo& other) const;
};

// The immediate of each RDMA write, in host order (the transport applies htonl/ntohl):
// bit 31 = credit return (else data), bit 30 = last fragment of a frame, bits 0..29 = the
// fragment length (data) or the number of returned slots (credit; 0 = the hello of Connect).
// Both bits set: a pull request (a one-fragment frame; bits 0..29 = its length).
struct IbverbsImmediate {
  static constexpr uint32_t kMaxValue = (1u << 30) - 1;  // so slot_bytes < 2^30
  static uint32_t Data(uint32_t length, bool last);      // REQUIRES: length <= kMaxValue
  static uint32_t Credit(uint32_t count);                // REQUIRES: count <= kMaxValue
  // A pull request: one fragment (a whole frame) whose payload is an IbverbsPullRequest; both
  // flag bits set. REQUIRES: length <= kMaxValue.
  static uint32_t Pull(uint32_t length);
  static IbverbsImmediate Parse(uint32_t immediate);

  bool credit = false;
  bool last = false;
  bool pull = false;  // then credit and last are false
  uint32_t value = 0;
};

// The payload of a pull-request frame: the receiver RDMA-READs `length` bytes at `address`
// (rkey `rkey`) of the sender's registered memory, checks their CRC-32C and delivers
// `prefix` + those bytes as the message. Wire: "OLPR" | u64 address | u32 rkey | u64 length |
// u32 crc32c | prefix (little-endian).
struct IbverbsPullRequest {
  uint64_t address = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
  uint32_t crc32c = 0;
  std::string prefix;

  std::string Encode() const;
  // InvalidArgument for bytes that are not a pull request.
  static absl::StatusOr<IbverbsPullRequest> Decode(absl::string_view bytes);
};

// Reassembles the fragments one peer sends into Frames and checks them: the frame decodes, it
// is addressed from -> to, its sequence is the next of the edge (0, 1, 2, ...), and its payload
// stays within max_payload_bytes (checked while fragments arrive). After an error the stream is
// unusable and every later Add returns the same error.
class FrameAssembler {
 public:
  FrameAssembler(Rank from, Rank to, int64_t max_payload_bytes);
  // Appends one fragment; returns the Frame when `last` completes it, nullopt otherwise.
  absl::StatusOr<std::optional<Frame>> Add(absl::string_view fragment, bool last);

 private:
  const Rank from_;
  const Rank to_;
  const uint64_t max_frame_bytes_;  // payload bound plus the frame header
  uint64_t next_sequence_ = 0;
  std::string partial_;
  absl::Status error_;
};

}  // namespace comm
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMM_IBVERBS_WIRE_H_
