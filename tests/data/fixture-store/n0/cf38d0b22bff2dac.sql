-- cf38d0b22bff2dac.sql: s/shards/n0/cf38d0b22bff2dac.sqlite as tunepar (cd78308ae652) wrote it (make-fixture.sh)
PRAGMA application_id = 1953853029;
PRAGMA user_version = 5;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('node_id','n0');
INSERT INTO meta VALUES('study_id','cf38d0b22bff2dac');
INSERT INTO meta VALUES('publish_seq','5');
CREATE TABLE studies (
  study_id         TEXT PRIMARY KEY,
  name             TEXT NOT NULL,
  world            INTEGER NOT NULL,
  model_name       TEXT NOT NULL,
  hardware_name    TEXT NOT NULL,
  space_name       TEXT NOT NULL,
  model_toml       TEXT NOT NULL,
  hardware_toml    TEXT NOT NULL,
  space_toml       TEXT NOT NULL,
  objective        TEXT NOT NULL,
  backend          TEXT NOT NULL,
  backend_settings TEXT NOT NULL,
  created_at       TEXT NOT NULL,
  created_by       TEXT NOT NULL
, seed INTEGER NOT NULL DEFAULT 0, acquisition TEXT NOT NULL DEFAULT 'logei', pinned_knobs TEXT NOT NULL DEFAULT '', checksum INTEGER NOT NULL DEFAULT 0);
INSERT INTO studies VALUES('cf38d0b22bff2dac','fixture-core',2,'tiny','local-cpu','default',replace('# A model small enough for exactness tests of the built-in core (tunepar-core) on a laptop.\nname = "tiny"\ndescription = "built-in core exactness tests"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 256\nglobal_batch = 8\n','\n',char(10)),replace('# This development machine (Debian 12, 2 cores of an AMD EPYC with AVX-512, 24 GiB, no\n# accelerator), for the `local` backend and the built-in core: one MPI rank per core plays one\n# "GPU". Measured 2026-11-21 with Eigen 3.4 (-O3 -march=native, 1 thread) and OpenMPI 4.1.4\n# over shared memory; re-measure on another machine (tunepar calibrate refits the rest). The\n# efficiencies were fitted by bench/calibration_benchmark.sh (4 ranks sharing the 2 cores).\nname = "local-cpu"\ndescription = "this 2-core machine: one MPI rank per core"\n\n[device]\nname = "CPU core"\npeak_tflops_fp32 = { value = 0.189, origin = "measured", source = "Eigen sgemm 1024^3, 1 thread: 189 GFLOP/s" }\npeak_tflops_fp16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\npeak_tflops_bf16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\nmemory_gb = { value = 8, origin = "assumed", source = "cap per rank: 24 GiB shared by 2 ranks, with room for the OS" }\nmemory_bandwidth_gbs = { value = 38.9, origin = "measured", source = "memcpy 256 MiB, read + write bytes" }\n\n[node]\ngpus_per_node = { value = 2, origin = "measured", source = "nproc: 2 cores, one rank each" }\nintra_node_bandwidth_gbs = { value = 10.1, origin = "measured", source = "OpenMPI shared-memory ping-pong, 16 MiB, one way" }\nnics_per_node = { value = 1, origin = "assumed", source = "one node, no network: shared memory stands in" }\nnic_bandwidth_gbs = { value = 10.1, origin = "assumed", source = "one node, no network: the shared-memory figure" }\n\n[efficiency]\n# tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%\ngemm_efficiency = { value = 0.968325, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\ngemm_half_size = { value = 40.1427, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nflash_efficiency = { value = 0.3, origin = "assumed", source = "tunepar-core''s fused attention on the CPU (flash_attention_cpu.cc) not yet fitted: calibrate fits it from sweeps with fa1 runs" }\nmemory_efficiency = { value = 1, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nkernel_overhead_us = { value = 5, origin = "assumed", source = "function calls and loops, no launches" }\nlink_efficiency = { value = 0.263558, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nlink_latency_us = { value = 22.8459, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "one node: shared memory" }\nnetwork_latency_us = { value = 1, origin = "assumed", source = "one node: shared memory" }\ndp_overlap = { value = 0, origin = "assumed", source = "the built-in core reduces after backward" }\nmemory_overhead_gb = { value = 0.2, origin = "assumed", source = "MPI and process overhead" }\nmemory_fragmentation = { value = 0.05, origin = "assumed", source = "malloc" }\n\n[calibration]\ndata = "tunepar-core local sweep of small at world 4"\ndate = "2026-11-22"\nruns = 32\nfitted = ["gemm_efficiency", "link_efficiency", "memory_efficiency", "gemm_half_size", "link_latency_us"]\nmean_abs_error_pct = 7.36\nmax_abs_error_pct = 22.40\n\n[launch]\ncpus_per_task = 1\nmpi = "pmix"\ncpu_masks = ["0x1", "0x2"]\n','\n',char(10)),replace('# The default search space: every knob tunepar understands. tp and pp take every divisor of\n# the world size; the constraints (tunepar space --world N) keep the legal ones.\nname = "default"\ndescription = "every knob tunepar understands"\n\n[knobs]\ntp = "divisors"\npp = "divisors"\nmicro_batch = [1, 2, 4, 8, 16]\nprecision = ["bf16", "fp16", "fp32"]\nzero = [0, 1]\nrecompute = ["none", "selective", "full"]\nseq_parallel = [false, true]\nvirtual_stages = [1, 2, 4]\nflash_attention = [false, true]\n\n[constraints]\ntp_cross_node = false  # keep tensor parallelism inside a node (seed 004: "TP < 8")\n','\n',char(10)),'max_tokens_per_s','local','{"acquisition":"logei","core":{"knobs":"sp0 vpp1","slice":"never","steps":1,"warmup":0},"performance_model":"roofline-v1","seed":5}','2026-11-28T05:35:47Z','n0',5,'logei','sp0 vpp1',-6824053663903172805);
CREATE TABLE trials (
  study_id          TEXT NOT NULL REFERENCES studies(study_id),
  node_id           TEXT NOT NULL,
  number            INTEGER NOT NULL,
  layout_key        TEXT NOT NULL,
  tp                INTEGER NOT NULL,
  pp                INTEGER NOT NULL,
  dp                INTEGER NOT NULL,
  micro_batch       INTEGER NOT NULL,
  num_micro_batches INTEGER NOT NULL,
  precision         TEXT NOT NULL,
  zero              INTEGER NOT NULL,
  recompute         TEXT NOT NULL,
  seq_parallel      INTEGER NOT NULL,
  virtual_stages    INTEGER NOT NULL,
  flash_attention   INTEGER NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'ok', 'oom', 'timeout',
                                                    'crash', 'invalid', 'interrupted')),
  attempt           INTEGER NOT NULL,
  step_time_s            REAL,
  tokens_per_s           REAL,
  tflops_per_gpu         REAL,
  peak_memory_bytes      REAL,
  objective              REAL,
  predicted_step_time_s  REAL,
  predicted_tokens_per_s REAL,
  predicted_memory_bytes REAL,
  details           TEXT NOT NULL,
  message           TEXT NOT NULL,
  log_path          TEXT NOT NULL,
  backend           TEXT NOT NULL,
  hosts             TEXT NOT NULL,
  tunepar_version   TEXT NOT NULL,
  git_revision      TEXT NOT NULL,
  host              TEXT NOT NULL,
  pid               INTEGER NOT NULL,
  started_at        TEXT NOT NULL,
  finished_at       TEXT NOT NULL,
  heartbeat_at      TEXT NOT NULL,
  lease_expires_at  TEXT NOT NULL, sliced INTEGER NOT NULL DEFAULT 0, metric_kind TEXT NOT NULL DEFAULT '', metric_value REAL, ranks_per_node INTEGER, process_group INTEGER NOT NULL DEFAULT 0, checksum INTEGER NOT NULL DEFAULT 0, role TEXT NOT NULL DEFAULT 'first'
  CHECK (role IN ('first', 'confirmation', 'rerun', 'reclassified', 'forgotten')), rerun_of TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (study_id, node_id, number)
);
INSERT INTO trials VALUES('cf38d0b22bff2dac','n0',1,'tp1-pp1-dp2-mbs4-nmb1-fp16-zero1-rcnone-sp0-vpp1-fa1',1,1,2,4,1,'fp16',1,'none',0,1,1,'ok',1,0.25018589200000002081,1023.2391521101436637,0.00070411951126324887149,4553480.0,0.25018589200000002081,0.0026415067197335922316,96914.385296668391677,203558656.0,'{"comm":"mpi","core":{"status":"ok"},"exit":"code 0","memory":{"cap_bytes":8000000000.0,"held_peak_bytes":4586248.0,"peak_by_category":{"activations":1229824.0,"comm_buffers":32768.0,"gradients":1310976.0,"optimizer":1310976.0,"weights":436992.0,"workspace":231944.0},"peak_bytes":4553480.0},"phases":{"compute":{"max":0.17692342799706853,"mean":0.1660846309952273},"dp_comm":{"max":0.06495017000270309,"mean":0.05373531300210743},"optimizer":{"max":0.02998964799917303,"mean":0.02157506799994735},"pp_wait":{"max":3.210006980225444e-07,"mean":2.8050271794199944e-07},"tp_comm":{"max":0.0,"mean":0.0}},"placement":[{"cpu_binding":"as launched (the launcher bound the rank)","cpus":"0","device":"cpu","dp_rank":0,"host":"vm","local_rank":0,"pp_rank":0,"rank":0,"threads":1,"tp_rank":0},{"cpu_binding":"as launched (the launcher bound the rank)","cpus":"1","device":"cpu","dp_rank":1,"host":"vm","local_rank":1,"pp_rank":0,"rank":1,"threads":1,"tp_rank":0}],"startup":{"device_and_comm_s":0.002846895000000016,"model_setup_s":0.028447706000000017,"mpi_init_s":0.350679126,"note":"each stage: its slowest rank; total_s: the slowest rank''s process start to first step","process_to_main_s":0.05597783100087311,"total_s":0.3922643269947613}}','measured 1 steps after 0 warm-up','s/trials/fixture-core/n0-1/output.log','local','vm','0.1.0','cd78308ae652','vm',8824,'2026-11-28T05:35:47Z','2026-11-28T05:35:50Z','2026-11-28T05:35:50Z','2026-11-28T05:35:50Z',0,'',NULL,2,0,-4478632418836159284,'first','');
INSERT INTO trials VALUES('cf38d0b22bff2dac','n0',2,'tp1-pp1-dp2-mbs4-nmb1-fp16-zero0-rcnone-sp0-vpp1-fa1',1,1,2,4,1,'fp16',0,'none',0,1,1,'ok',1,0.15823920499999999389,1617.8038811557478311,0.00111325614913194244,5427464.0,0.15823920499999999389,0.0027256609613788367572,93922.172870134469123,204868096.0,'{"comm":"mpi","core":{"status":"ok"},"exit":"code 0","memory":{"cap_bytes":8000000000.0,"held_peak_bytes":5460232.0,"peak_by_category":{"activations":1229824.0,"comm_buffers":32768.0,"gradients":873984.0,"optimizer":2621952.0,"weights":436992.0,"workspace":231944.0},"peak_bytes":5427464.0},"phases":{"compute":{"max":0.11129660200789249,"mean":0.10451898100435103},"dp_comm":{"max":0.02896949800197035,"mean":0.019108415996015538},"optimizer":{"max":0.031528316998446826,"mean":0.0256870320008602},"pp_wait":{"max":2.9998773243278265e-08,"mean":2.9998773243278265e-08},"tp_comm":{"max":0.0,"mean":0.0}},"placement":[{"cpu_binding":"as launched (the launcher bound the rank)","cpus":"0","device":"cpu","dp_rank":0,"host":"vm","local_rank":0,"pp_rank":0,"rank":0,"threads":1,"tp_rank":0},{"cpu_binding":"as launched (the launcher bound the rank)","cpus":"1","device":"cpu","dp_rank":1,"host":"vm","local_rank":1,"pp_rank":0,"rank":1,"threads":1,"tp_rank":0}],"startup":{"device_and_comm_s":0.0007596850000000099,"model_setup_s":0.015682503000000014,"mpi_init_s":0.29410662099999996,"note":"each stage: its slowest rank; total_s: the slowest rank''s process start to first step","process_to_main_s":0.010412581002037269,"total_s":0.32087593300203726}}','measured 1 steps after 0 warm-up','s/trials/fixture-core/n0-2/output.log','local','vm','0.1.0','cd78308ae652','vm',8824,'2026-11-28T05:35:50Z','2026-11-28T05:35:53Z','2026-11-28T05:35:53Z','2026-11-28T05:35:53Z',0,'',NULL,2,0,3832869425154478706,'first','');
CREATE TABLE rank_measurements (
  study_id     TEXT NOT NULL,
  node_id      TEXT NOT NULL,
  trial_number INTEGER NOT NULL,
  rank         INTEGER NOT NULL,
  host         TEXT NOT NULL,
  local_rank   INTEGER NOT NULL,
  cpu_mask     TEXT NOT NULL,
  device       TEXT NOT NULL,
  metrics      TEXT NOT NULL,
  PRIMARY KEY (study_id, node_id, trial_number, rank)
);
CREATE TABLE hardware_profiles (
  name         TEXT NOT NULL,
  fitted_at    TEXT NOT NULL,
  profile_toml TEXT NOT NULL,
  fit_error    TEXT NOT NULL,
  PRIMARY KEY (name, fitted_at)
);
CREATE INDEX trials_by_layout ON trials (study_id, layout_key);
COMMIT;
