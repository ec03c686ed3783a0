#include "oneflow_like/comm/gloo_ol_transport.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/common/error.h"
#include "oneflow_like/comm/gloo_ol_context.h"
#include "oneflow_like/comm/tcp_transport.h"

namespace oneflow_like {
namespace comm {
namespace {

// A context's links: a TcpTransport among its members.
class TcpGlooMesh final : public GlooMesh {
 public:
  explicit TcpGlooMesh(std::unique_ptr<TcpTransport> tcp) : tcp_(std::move(tcp)) {}
  Transport* transport() override { return tcp_.get(); }
  std::string address() const override { return tcp_->endpoint(); }
  absl::Status Connect(const std::vector<std::string>& addresses) override { return tcp_->Connect(addresses); }
  void SetErrorHandler(std::function<void(int member, const absl::Status&)> handler) override {
    tcp_->SetLinkErrorHandler(
        [handler = std::move(handler)](Rank peer, const absl::Status& status) { handler(peer.value(), status); });
  }

 private:
  std::unique_ptr<TcpTransport> tcp_;
};

class OlGlooDevice final : public ::gloo::transport::Device {
 public:
  explicit OlGlooDevice(OlGlooDeviceOptions options) : options_(std::move(options)) {}
  std::string str() const override { return absl::StrCat("oneflow_like tcp on ", options_.bind_address); }
  const std::string& getPCIBusID() const override { return pci_bus_id_; }

  std::shared_ptr<::gloo::transport::Context> createContext(int rank, int size) override {
    const size_t max_early_bytes = static_cast<size_t>(std::max<int64_t>(options_.max_early_bytes, 0));
    if (size <= 1) return std::make_shared<OlGlooContext>(rank, size, nullptr, max_early_bytes);
    absl::StatusOr<std::unique_ptr<TcpTransport>> listening =
        TcpTransport::Listen(OlGlooMeshOptions(options_, rank, size));
    if (!listening.ok()) {
      throw ::gloo::IoException(absl::StrCat("ol gloo transport: member ", rank, " of ", size,
                                             " cannot listen: ", listening.status().ToString()));
    }
    return std::make_shared<OlGlooContext>(rank, size, std::make_unique<TcpGlooMesh>(*std::move(listening)),
                                           max_early_bytes);
  }

 private:
  const OlGlooDeviceOptions options_;
  const std::string pci_bus_id_;
};

}  // namespace

TcpTransportOptions OlGlooMeshOptions(const OlGlooDeviceOptions& options, int rank, int size) {
  TcpTransportOptions tcp;
  tcp.rank = rank;
  tcp.world_size = size;
  tcp.bind_address = options.bind_address;
  tcp.job_token = options.job_token;
  tcp.connect_timeout_ms = options.connect_timeout_ms;
  tcp.close_listener_after_connect = true;
  tcp.max_pending_connections = options.max_pending_connections;
  tcp.keep_spare_payloads = false;
  return tcp;
}

std::shared_ptr<::gloo::transport::Device> CreateOlGlooDevice(OlGlooDeviceOptions options) {
  return std::make_shared<OlGlooDevice>(std::move(options));
}

}  // namespace comm
}  // namespace oneflow_like
