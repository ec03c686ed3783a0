// Status helpers for oneflow_like.
//
// Fallible boundaries return absl::Status / absl::StatusOr<T>. Codes are deliberate:
//   InvalidArgument     a bad user graph, SBP, shape or attribute
//   FailedPrecondition  wrong lifecycle (e.g. using a registry before registration)
//   NotFound            an unknown op, attribute or name
//   Unavailable         a transport failure
//   Internal            a bug in oneflow_like itself (e.g. a compiler invariant)
// Debian's Abseil predates absl's own status macros, so we define two small ones here.
#ifndef ONEFLOW_LIKE_CORE_STATUS_H_
#define ONEFLOW_LIKE_CORE_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OL_STATUS_CONCAT_INNER_(a, b) a##b
#define OL_STATUS_CONCAT_(a, b) OL_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if not OK.
#define RETURN_IF_ERROR(expr)                                  \
  do {                                                         \
    ::absl::Status ol_status_ = (expr);                        \
    if (!ol_status_.ok()) return ol_status_;                   \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` evaluates a StatusOr; on error returns its status,
// otherwise moves the value into the declaration on the left.
#define ASSIGN_OR_RETURN(lhs, expr) \
  OL_ASSIGN_OR_RETURN_IMPL_(OL_STATUS_CONCAT_(ol_statusor_, __LINE__), lhs, expr)
#define OL_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#endif  // ONEFLOW_LIKE_CORE_STATUS_H_
