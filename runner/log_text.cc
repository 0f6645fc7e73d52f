#include "runner/log_text.h"

#include <fstream>

namespace tunepar::runner {

std::string LastLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!Trim(line).empty()) last = Trim(line);
  }
  return last;
}

}  // namespace tunepar::runner
