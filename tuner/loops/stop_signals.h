// SIGINT and SIGTERM during a search: the handlers only record the signal; the search loop
// notices, stops its running trials, records them as interrupted, and exits 128 + signal.
#pragma once

namespace tunepar {

void InstallStopHandlers();
// 0 while no stop was asked for; else the signal number (SIGINT or SIGTERM).
int StopSignal();

}  // namespace tunepar
