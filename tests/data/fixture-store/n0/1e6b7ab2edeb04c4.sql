-- 1e6b7ab2edeb04c4.sql: s/shards/n0/1e6b7ab2edeb04c4.sqlite as tunepar (cd78308ae652) wrote it (make-fixture.sh)
PRAGMA application_id = 1953853029;
PRAGMA user_version = 5;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('node_id','n0');
INSERT INTO meta VALUES('study_id','1e6b7ab2edeb04c4');
INSERT INTO meta VALUES('publish_seq','9');
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
INSERT INTO studies VALUES('1e6b7ab2edeb04c4','fixture-command',4,'tiny','local-cpu','default',replace('# A model small enough for exactness tests of the built-in core (tunepar-core) on a laptop.\nname = "tiny"\ndescription = "built-in core exactness tests"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 256\nglobal_batch = 8\n','\n',char(10)),replace('# This development machine (Debian 12, 2 cores of an AMD EPYC with AVX-512, 24 GiB, no\n# accelerator), for the `local` backend and the built-in core: one MPI rank per core plays one\n# "GPU". Measured 2026-11-21 with Eigen 3.4 (-O3 -march=native, 1 thread) and OpenMPI 4.1.4\n# over shared memory; re-measure on another machine (tunepar calibrate refits the rest). The\n# efficiencies were fitted by bench/calibration_benchmark.sh (4 ranks sharing the 2 cores).\nname = "local-cpu"\ndescription = "this 2-core machine: one MPI rank per core"\n\n[device]\nname = "CPU core"\npeak_tflops_fp32 = { value = 0.189, origin = "measured", source = "Eigen sgemm 1024^3, 1 thread: 189 GFLOP/s" }\npeak_tflops_fp16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\npeak_tflops_bf16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\nmemory_gb = { value = 8, origin = "assumed", source = "cap per rank: 24 GiB shared by 2 ranks, with room for the OS" }\nmemory_bandwidth_gbs = { value = 38.9, origin = "measured", source = "memcpy 256 MiB, read + write bytes" }\n\n[node]\ngpus_per_node = { value = 2, origin = "measured", source = "nproc: 2 cores, one rank each" }\nintra_node_bandwidth_gbs = { value = 10.1, origin = "measured", source = "OpenMPI shared-memory ping-pong, 16 MiB, one way" }\nnics_per_node = { value = 1, origin = "assumed", source = "one node, no network: shared memory stands in" }\nnic_bandwidth_gbs = { value = 10.1, origin = "assumed", source = "one node, no network: the shared-memory figure" }\n\n[efficiency]\n# tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%\ngemm_efficiency = { value = 0.968325, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\ngemm_half_size = { value = 40.1427, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nflash_efficiency = { value = 0.3, origin = "assumed", source = "tunepar-core''s fused attention on the CPU (flash_attention_cpu.cc) not yet fitted: calibrate fits it from sweeps with fa1 runs" }\nmemory_efficiency = { value = 1, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nkernel_overhead_us = { value = 5, origin = "assumed", source = "function calls and loops, no launches" }\nlink_efficiency = { value = 0.263558, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nlink_latency_us = { value = 22.8459, origin = "fitted", source = "tunepar calibrate on tunepar-core local sweep of small at world 4 (2026-11-22): 32 runs, mean |error| 7.4%, worst 22.4%" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "one node: shared memory" }\nnetwork_latency_us = { value = 1, origin = "assumed", source = "one node: shared memory" }\ndp_overlap = { value = 0, origin = "assumed", source = "the built-in core reduces after backward" }\nmemory_overhead_gb = { value = 0.2, origin = "assumed", source = "MPI and process overhead" }\nmemory_fragmentation = { value = 0.05, origin = "assumed", source = "malloc" }\n\n[calibration]\ndata = "tunepar-core local sweep of small at world 4"\ndate = "2026-11-22"\nruns = 32\nfitted = ["gemm_efficiency", "link_efficiency", "memory_efficiency", "gemm_half_size", "link_latency_us"]\nmean_abs_error_pct = 7.36\nmax_abs_error_pct = 22.40\n\n[launch]\ncpus_per_task = 1\nmpi = "pmix"\ncpu_masks = ["0x1", "0x2"]\n','\n',char(10)),replace('description = ''every knob tunepar understands''\nname = ''default''\n\n[constraints]\ntp_cross_node = false\n\n[knobs]\nflash_attention = [ false, true ]\nmicro_batch = [ 1, 2, 4, 8, 16 ]\npp = ''divisors''\nprecision = [ ''fp32'' ]\nrecompute = [ ''none'', ''selective'', ''full'' ]\nseq_parallel = [ false, true ]\ntp = ''divisors''\nvirtual_stages = [ 1, 2, 4 ]\nzero = [ 0, 1 ]','\n',char(10)),'max_tokens_per_s','command','{"acquisition":"logei","command":"echo tps: $(( {mbs} * 100 + {tp} * 10 + {pp} ))","metric":"higher","metric_json":"","metric_regex":"tps: ([0-9]+)","performance_model":"roofline-v1","seed":3}','2026-11-28T05:35:46Z','n0',3,'logei','fp32 zero0 rcnone sp0 vpp1 fa0',4671630766975707104);
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
INSERT INTO trials VALUES('1e6b7ab2edeb04c4','n0',1,'tp1-pp1-dp4-mbs2-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa0',1,1,4,2,1,'fp32',0,'none',0,1,0,'ok',1,NULL,NULL,NULL,NULL,0.0047393364928909956224,0.0021929972749186862554,116735.21117781242355,205143347.19999998807,'{"exit":"code 0"}','higher = 211','s/trials/fixture-command/n0-1/output.log','command','vm','0.1.0','cd78308ae652','vm',8815,'2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z',0,'higher',211.0,0,0,-1851780007592849074,'first','');
INSERT INTO trials VALUES('1e6b7ab2edeb04c4','n0',2,'tp2-pp1-dp2-mbs4-nmb1-fp32-zero0-rcnone-sp0-vpp1-fa0',2,1,2,4,1,'fp32',0,'none',0,1,0,'ok',1,NULL,NULL,NULL,NULL,0.0023752969121140143568,0.0028493321901744751191,89845.613959221853296,203801907.19999998808,'{"exit":"code 0"}','higher = 421','s/trials/fixture-command/n0-2/output.log','command','vm','0.1.0','cd78308ae652','vm',8815,'2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z',0,'higher',421.0,0,0,6504304707098217993,'first','');
INSERT INTO trials VALUES('1e6b7ab2edeb04c4','n0',3,'tp2-pp1-dp2-mbs2-nmb2-fp32-zero0-rcnone-sp0-vpp1-fa0',2,1,2,2,2,'fp32',0,'none',0,1,0,'ok',1,NULL,NULL,NULL,NULL,0.0045248868778280547028,0.0039176312551806894909,65345.608947106673439,202787737.59999999403,'{"exit":"code 0"}','higher = 221','s/trials/fixture-command/n0-3/output.log','command','vm','0.1.0','cd78308ae652','vm',8815,'2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z',0,'higher',221.0,0,0,8893631976590989311,'first','');
INSERT INTO trials VALUES('1e6b7ab2edeb04c4','n0',4,'tp1-pp2-dp2-mbs1-nmb4-fp32-zero0-rcnone-sp0-vpp1-fa0',1,2,2,1,4,'fp32',0,'none',0,1,0,'ok',1,NULL,NULL,NULL,NULL,0.0089285714285714280757,0.0028485052618967441825,89871.696368058095688,202665676.80000001192,'{"exit":"code 0"}','higher = 112','s/trials/fixture-command/n0-4/output.log','command','vm','0.1.0','cd78308ae652','vm',8815,'2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z','2026-11-28T05:35:46Z',0,'higher',112.0,0,0,-1935512760423402693,'first','');
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
