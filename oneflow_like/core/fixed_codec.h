// Fixed-width little-endian integers for bytes that cross processes (transport frames, actor
// messages). The byte order is fixed, so ranks on machines of different endianness agree.
//
//   std::string out;
//   AppendFixed<int64_t>(&out, -2);            // 8 bytes: fe ff ff ff ff ff ff ff
//   size_t pos = 0;
//   int64_t v = ReadFixed<int64_t>(out, &pos); // v == -2, pos == 8
//
// Callers check lengths before reading (ReadFixed does not). Pure functions; thread-safe.
#ifndef ONEFLOW_LIKE_CORE_FIXED_CODEC_H_
#define ONEFLOW_LIKE_CORE_FIXED_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace oneflow_like {

template <typename T>
void AppendFixed(std::string* out, T value) {
  static_assert(std::is_integral<T>::value, "AppendFixed takes integers");
  using U = typename std::make_unsigned<T>::type;
  U bits = static_cast<U>(value);
  for (size_t i = 0; i < sizeof(T); ++i) {
    out->push_back(static_cast<char>(bits & 0xff));
    bits = static_cast<U>(bits >> 4 >> 4);  // two shifts: no UB for 8-bit types
  }
}

// REQUIRES: *pos + sizeof(T) <= bytes.size().
template <typename T>
T ReadFixed(absl::string_view bytes, size_t* pos) {
  static_assert(std::is_integral<T>::value, "ReadFixed takes integers");
  using U = typename std::make_unsigned<T>::type;
  U bits = 0;
  for (size_t i = sizeof(T); i-- > 0;) {
    bits = static_cast<U>((bits << 4 << 4) | static_cast<unsigned char>(bytes[*pos + i]));
  }
  *pos += sizeof(T);
  return static_cast<T>(bits);
}

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_FIXED_CODEC_H_
