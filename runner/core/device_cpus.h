// Each rank's CPUs near its GPU: a rank's host threads (the launches, the staging copies, MPI)
// run best on the cores of the NUMA domain its device hangs off, as the LUMI launch scripts bind
// one CCD of 8 cores per GCD. Where the machine says which CPUs are near a device (the PCI
// device's local_cpulist in sysfs), the ranks placed near one NUMA domain split its CPUs among
// themselves, in local-rank order; where it does not, a rank keeps the CPUs it was launched with.
#pragma once

#include <string>
#include <vector>

namespace tunepar::core {

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}; empty for text that is not a CPU list.
std::vector<int> ParseCpuList(const std::string& text);
// {0,1,2,3,8} -> "0-3,8".
std::string CpuListText(const std::vector<int>& cpus);

// The CPUs sysfs lists as local to the PCI device `bus_id` ("0000:3B:00.0", any case) under
// `sysfs_root` ("/sys"); empty when it does not say.
std::vector<int> CpusNearPciDevice(const std::string& sysfs_root, const std::string& bus_id);

// This rank's share of the CPUs near its device: the local ranks whose devices list the same
// near CPUs split them in local-rank order (`near[r]`: local rank r's list; each share at least
// one CPU, shares overlap only when there are more such ranks than CPUs), kept within `allowed`
// (the CPUs the rank may run on; empty: no limit). Empty when nothing can be bound: the
// device's list is empty, or the share lies outside `allowed`.
std::vector<int> ShareOfNearCpus(const std::vector<std::vector<int>>& near, int local_rank,
                                 const std::vector<int>& allowed);

}  // namespace tunepar::core
