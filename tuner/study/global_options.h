// The options every tunepar command shares (--store, --verbose, --json): which store a study lives
// in and whether output is for people or programs. The CLI parses them (tuner/cli/commands.h); the
// study's session and lookup and the search loops read them, so they live here, below the CLI.
#pragma once

#include <string>

namespace tunepar {

struct GlobalOptions {
  std::string store = "tunepar-store";  // --store DIR (or $TUNEPAR_STORE)
  bool verbose = false;                 // --verbose: debug logging on stderr
  bool json = false;                    // --json: machine-readable output on stdout
};

}  // namespace tunepar
