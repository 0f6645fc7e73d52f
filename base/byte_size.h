// Sizes of memory as people and programs write them: "24GB", "512 MiB", "1.5e9", "79.15 GiB".
#pragma once

#include <optional>
#include <string_view>

namespace tunepar {

// Bytes, from a number with an optional unit (B, KB, MB, GB, TB: powers of 1000; KiB, MiB,
// GiB, TiB: powers of 1024; case-insensitive; spaces around the unit allowed). nullopt when the
// text is not such a size or not positive.
std::optional<double> ParseByteSize(std::string_view text);

}  // namespace tunepar
