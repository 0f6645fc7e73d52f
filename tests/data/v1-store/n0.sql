-- A shard written by tunepar 0.1.0 at schema version 1 (07e6577), as 'sqlite3 n0.sqlite .dump'
-- printed it: two studies searched with model.toml, space.toml and ../test-cpu.toml (a command
-- study with a custom metric, seed 7, UCB, and a trial left running by a tuner on another host;
-- a local study measured on slices), whose facts lived in JSON. Load: sqlite3 FILE < n0.sql
PRAGMA application_id = 1953853029;
PRAGMA user_version = 1;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('node_id','n0');
INSERT INTO meta VALUES('publish_seq','12');
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
);
INSERT INTO studies VALUES('9398e629a1956254','tiny-w2-9398e629',2,'tiny','test-cpu','default',replace('# A fixed copy of configs/models/tiny.toml: the study in v1-store/n0.sql was searched with it,\n# and its id depends on it (tests/store_migration_test.cc resumes that study).\n# A model small enough for exactness tests of the built-in core (tunepar-core) on a laptop.\nname = "tiny"\ndescription = "built-in core exactness tests"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 256\nglobal_batch = 8\n','\n',char(10)),replace('# A fixed CPU profile for the search-loop and report tests (the efficiencies local-cpu had before\n# it was calibrated). The fake trainer''s hangs, crashes and OOMs sit where this profile''s model\n# sends the first proposals, so these tests must not follow configs/hardware/local-cpu.toml,\n# which is refitted to this machine by bench/calibration_benchmark.sh.\n# This development machine (Debian 12, 2 cores of an AMD EPYC with AVX-512, 24 GiB, no\n# accelerator), for the `local` backend and the built-in core: one MPI rank per core plays one\n# "GPU". Measured 2026-11-21 with Eigen 3.4 (-O3 -march=native, 1 thread) and OpenMPI 4.1.4\n# over shared memory; re-measure on another machine (tunepar calibrate refits the rest).\nname = "test-cpu"\ndescription = "this 2-core machine: one MPI rank per core"\n\n[device]\nname = "CPU core"\npeak_tflops_fp32 = { value = 0.189, origin = "measured", source = "Eigen sgemm 1024^3, 1 thread: 189 GFLOP/s" }\npeak_tflops_fp16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\npeak_tflops_bf16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\nmemory_gb = { value = 8, origin = "assumed", source = "cap per rank: 24 GiB shared by 2 ranks, with room for the OS" }\nmemory_bandwidth_gbs = { value = 38.9, origin = "measured", source = "memcpy 256 MiB, read + write bytes" }\n\n[node]\ngpus_per_node = { value = 2, origin = "measured", source = "nproc: 2 cores, one rank each" }\nintra_node_bandwidth_gbs = { value = 10.1, origin = "measured", source = "OpenMPI shared-memory ping-pong, 16 MiB, one way" }\nnics_per_node = { value = 1, origin = "assumed", source = "one node, no network: shared memory stands in" }\nnic_bandwidth_gbs = { value = 10.1, origin = "assumed", source = "one node, no network: the shared-memory figure" }\n\n[efficiency]\n# The performance model''s efficiency parameters (tunepar calibrate fits them to measured runs).\ngemm_efficiency = { value = 0.8, origin = "assumed", source = "Eigen sgemm reaches most of its measured rate" }\ngemm_half_size = { value = 16, origin = "assumed", source = "small register-blocked kernels" }\nflash_efficiency = { value = 0.3, origin = "assumed", source = "no fused attention on the CPU" }\nmemory_efficiency = { value = 0.5, origin = "assumed", source = "scalar element-wise loops" }\nkernel_overhead_us = { value = 5, origin = "assumed", source = "function calls and loops, no launches" }\nlink_efficiency = { value = 0.8, origin = "assumed", source = "OpenMPI shared memory" }\nlink_latency_us = { value = 1, origin = "assumed", source = "OpenMPI shared-memory latency (0.4 us measured, 8 B)" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "one node: shared memory" }\nnetwork_latency_us = { value = 1, origin = "assumed", source = "one node: shared memory" }\ndp_overlap = { value = 0.0, origin = "assumed", source = "the built-in core reduces after backward" }\nmemory_overhead_gb = { value = 0.2, origin = "assumed", source = "MPI and process overhead" }\nmemory_fragmentation = { value = 0.05, origin = "assumed", source = "malloc" }\n\n[launch]\ncpus_per_task = 1\nmpi = "pmix"\ncpu_masks = ["0x1", "0x2"]\n','\n',char(10)),replace('# A fixed copy of configs/spaces/default.toml: the study in v1-store/n0.sql was searched with\n# it, and its id depends on it (tests/store_migration_test.cc resumes that study).\n# The default search space: every knob tunepar understands. tp and pp take every divisor of\n# the world size; the constraints (tunepar space --world N) keep the legal ones.\nname = "default"\ndescription = "every knob tunepar understands"\n\n[knobs]\ntp = "divisors"\npp = "divisors"\nmicro_batch = [1, 2, 4, 8, 16]\nprecision = ["bf16", "fp16", "fp32"]\nzero = [0, 1]\nrecompute = ["none", "selective", "full"]\nseq_parallel = [false, true]\nvirtual_stages = [1, 2, 4]\nflash_attention = [false, true]\n\n[constraints]\ntp_cross_node = false  # keep tensor parallelism inside a node (seed 004: "TP < 8")\n','\n',char(10)),'max_tokens_per_s','command','{"acquisition":"ucb","command":"echo tps: $(( {mbs} * 100 + {tp} * 10 ))","metric":"higher","metric_json":"","metric_regex":"tps: ([0-9]+)","performance_model":"roofline-v1","seed":7}','2026-11-23T20:03:28Z','n0');
INSERT INTO studies VALUES('4a864f6e99be8236','tiny-w4-4a864f6e',4,'tiny','test-cpu','default',replace('# A fixed copy of configs/models/tiny.toml: the study in v1-store/n0.sql was searched with it,\n# and its id depends on it (tests/store_migration_test.cc resumes that study).\n# A model small enough for exactness tests of the built-in core (tunepar-core) on a laptop.\nname = "tiny"\ndescription = "built-in core exactness tests"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 256\nglobal_batch = 8\n','\n',char(10)),replace('# A fixed CPU profile for the search-loop and report tests (the efficiencies local-cpu had before\n# it was calibrated). The fake trainer''s hangs, crashes and OOMs sit where this profile''s model\n# sends the first proposals, so these tests must not follow configs/hardware/local-cpu.toml,\n# which is refitted to this machine by bench/calibration_benchmark.sh.\n# This development machine (Debian 12, 2 cores of an AMD EPYC with AVX-512, 24 GiB, no\n# accelerator), for the `local` backend and the built-in core: one MPI rank per core plays one\n# "GPU". Measured 2026-11-21 with Eigen 3.4 (-O3 -march=native, 1 thread) and OpenMPI 4.1.4\n# over shared memory; re-measure on another machine (tunepar calibrate refits the rest).\nname = "test-cpu"\ndescription = "this 2-core machine: one MPI rank per core"\n\n[device]\nname = "CPU core"\npeak_tflops_fp32 = { value = 0.189, origin = "measured", source = "Eigen sgemm 1024^3, 1 thread: 189 GFLOP/s" }\npeak_tflops_fp16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\npeak_tflops_bf16 = { value = 0.189, origin = "assumed", source = "16-bit storage, fp32 arithmetic: the fp32 rate" }\nmemory_gb = { value = 8, origin = "assumed", source = "cap per rank: 24 GiB shared by 2 ranks, with room for the OS" }\nmemory_bandwidth_gbs = { value = 38.9, origin = "measured", source = "memcpy 256 MiB, read + write bytes" }\n\n[node]\ngpus_per_node = { value = 2, origin = "measured", source = "nproc: 2 cores, one rank each" }\nintra_node_bandwidth_gbs = { value = 10.1, origin = "measured", source = "OpenMPI shared-memory ping-pong, 16 MiB, one way" }\nnics_per_node = { value = 1, origin = "assumed", source = "one node, no network: shared memory stands in" }\nnic_bandwidth_gbs = { value = 10.1, origin = "assumed", source = "one node, no network: the shared-memory figure" }\n\n[efficiency]\n# The performance model''s efficiency parameters (tunepar calibrate fits them to measured runs).\ngemm_efficiency = { value = 0.8, origin = "assumed", source = "Eigen sgemm reaches most of its measured rate" }\ngemm_half_size = { value = 16, origin = "assumed", source = "small register-blocked kernels" }\nflash_efficiency = { value = 0.3, origin = "assumed", source = "no fused attention on the CPU" }\nmemory_efficiency = { value = 0.5, origin = "assumed", source = "scalar element-wise loops" }\nkernel_overhead_us = { value = 5, origin = "assumed", source = "function calls and loops, no launches" }\nlink_efficiency = { value = 0.8, origin = "assumed", source = "OpenMPI shared memory" }\nlink_latency_us = { value = 1, origin = "assumed", source = "OpenMPI shared-memory latency (0.4 us measured, 8 B)" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "one node: shared memory" }\nnetwork_latency_us = { value = 1, origin = "assumed", source = "one node: shared memory" }\ndp_overlap = { value = 0.0, origin = "assumed", source = "the built-in core reduces after backward" }\nmemory_overhead_gb = { value = 0.2, origin = "assumed", source = "MPI and process overhead" }\nmemory_fragmentation = { value = 0.05, origin = "assumed", source = "malloc" }\n\n[launch]\ncpus_per_task = 1\nmpi = "pmix"\ncpu_masks = ["0x1", "0x2"]\n','\n',char(10)),replace('# A fixed copy of configs/spaces/default.toml: the study in v1-store/n0.sql was searched with\n# it, and its id depends on it (tests/store_migration_test.cc resumes that study).\n# The default search space: every knob tunepar understands. tp and pp take every divisor of\n# the world size; the constraints (tunepar space --world N) keep the legal ones.\nname = "default"\ndescription = "every knob tunepar understands"\n\n[knobs]\ntp = "divisors"\npp = "divisors"\nmicro_batch = [1, 2, 4, 8, 16]\nprecision = ["bf16", "fp16", "fp32"]\nzero = [0, 1]\nrecompute = ["none", "selective", "full"]\nseq_parallel = [false, true]\nvirtual_stages = [1, 2, 4]\nflash_attention = [false, true]\n\n[constraints]\ntp_cross_node = false  # keep tensor parallelism inside a node (seed 004: "TP < 8")\n','\n',char(10)),'max_tokens_per_s','local','{"acquisition":"logei","core":{"knobs":"sp0 vpp1 fa0","slice":"auto","steps":1,"warmup":0},"performance_model":"roofline-v1","seed":0}','2026-11-23T20:03:28Z','n0');
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
  lease_expires_at  TEXT NOT NULL,
  PRIMARY KEY (study_id, node_id, number)
);
INSERT INTO trials VALUES('9398e629a1956254','n0',1,'tp1-pp1-dp2-mbs4-nmb1-fp16-zero1-rcnone-sp0-vpp1-fa1',1,1,2,4,1,'fp16',1,'none',0,1,1,'ok',1,NULL,NULL,NULL,NULL,0.0024390243902439024369,0.0023407627066378247811,109366.0622984325746,203558656.0,'{"exit":"code 0","metric":{"kind":"higher","value":410.0}}','higher = 410','/tmp/fx/trials/tiny-w2-9398e629/n0-1/output.log','command','vm','0.1.0','07e6577a5ec0-dirty','vm',19285,'2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z');
INSERT INTO trials VALUES('9398e629a1956254','n0',2,'tp1-pp1-dp2-mbs4-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa1',1,1,2,4,1,'bf16',1,'none',0,1,1,'ok',1,NULL,NULL,NULL,NULL,0.0024390243902439024369,0.002390213738733322317,107103.39240860755671,203995136.0,'{"exit":"code 0","metric":{"kind":"higher","value":410.0}}','higher = 410','/tmp/fx/trials/tiny-w2-9398e629/n0-2/output.log','command','vm','0.1.0','07e6577a5ec0-dirty','vm',19285,'2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z');
INSERT INTO trials VALUES('9398e629a1956254','n0',3,'tp1-pp1-dp2-mbs4-nmb1-fp16-zero1-rcselective-sp0-vpp1-fa1',1,1,2,4,1,'fp16',1,'selective',0,1,1,'ok',1,NULL,NULL,NULL,NULL,0.0024390243902439024369,0.0024147363221581068411,106015.71594003554491,203558656.0,'{"exit":"code 0","metric":{"kind":"higher","value":410.0}}','higher = 410','/tmp/fx/trials/tiny-w2-9398e629/n0-3/output.log','command','vm','0.1.0','07e6577a5ec0-dirty','vm',19285,'2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z');
INSERT INTO trials VALUES('4a864f6e99be8236','n0',1,'tp1-pp1-dp4-mbs2-nmb1-fp16-zero1-rcnone-sp0-vpp1-fa0',1,1,4,2,1,'fp16',1,'none',0,1,0,'ok',1,0.011431472900990098315,22394.314557472942397,0.0077050774439023708706,3881728.0,0.011431472900990098315,0.0013678820243478624369,187150.64270403579576,202387840.0,'{"core":{"status":"ok"},"exit":"code 0","memory":{"cap_bytes":8000000000.0,"peak_by_category":{"activations":682240.0,"comm_buffers":8192.0,"gradients":1310976.0,"optimizer":1310976.0,"weights":436992.0,"workspace":132352.0},"peak_bytes":3881728.0},"phases":{"compute":{"max":0.008096060999999995,"mean":0.0070633224999999975},"dp_comm":{"max":0.003368141,"mean":0.002305556500000001},"optimizer":{"max":0.0020592160000000026,"mean":0.002030236500000001},"pp_wait":{"max":4.810000000000925e-07,"mean":4.5600000000024093e-07},"tp_comm":{"max":0.0,"mean":0.0}},"placement":[{"cpus":"0","device":"cpu","dp_rank":0,"host":"vm","local_rank":0,"pp_rank":0,"rank":0,"threads":1,"tp_rank":0},{"cpus":"1","device":"cpu","dp_rank":1,"host":"vm","local_rank":1,"pp_rank":0,"rank":1,"threads":1,"tp_rank":0}],"slice":{"dp_comm_added_s":3.1009900990099004e-05,"measured_layout":"tp1-pp1-dp2-mbs2-nmb1-fp16-zero1-rcnone-sp0-vpp1-fa0","measured_step_time_s":0.011400463,"measured_world":2}}','sliced: measured tp1-pp1-dp2-mbs2-nmb1-fp16-zero1-rcnone-sp0-vpp1-fa0 on 2 ranks (0.0114 s/step), plus 3.1e-05 s of exposed DP communication for dp 4 from the performance model','/tmp/fx/trials/tiny-w4-4a864f6e/n0-1/output.log','local','vm','0.1.0','07e6577a5ec0-dirty','vm',19293,'2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z');
INSERT INTO trials VALUES('4a864f6e99be8236','n0',2,'tp1-pp1-dp4-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0',1,1,4,2,1,'bf16',1,'none',0,1,0,'ok',1,0.011121472851485148317,23018.533913501760253,0.0079198488524150692513,3881728.0,0.011121472851485148317,0.0014196174413857102873,180330.27246418900904,202824320.0,'{"core":{"status":"ok"},"exit":"code 0","memory":{"cap_bytes":8000000000.0,"peak_by_category":{"activations":682240.0,"comm_buffers":8192.0,"gradients":1310976.0,"optimizer":1310976.0,"weights":436992.0,"workspace":132352.0},"peak_bytes":3881728.0},"phases":{"compute":{"max":0.007043454999999998,"mean":0.006802279999999999},"dp_comm":{"max":0.002757349,"mean":0.002429271500000001},"optimizer":{"max":0.001931828,"mean":0.0018445299999999996},"pp_wait":{"max":4.810000000000925e-07,"mean":4.460000000003003e-07},"tp_comm":{"max":0.0,"mean":0.0}},"placement":[{"cpus":"0","device":"cpu","dp_rank":0,"host":"vm","local_rank":0,"pp_rank":0,"rank":0,"threads":1,"tp_rank":0},{"cpus":"1","device":"cpu","dp_rank":1,"host":"vm","local_rank":1,"pp_rank":0,"rank":1,"threads":1,"tp_rank":0}],"slice":{"dp_comm_added_s":4.451485148514853e-05,"measured_layout":"tp1-pp1-dp2-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0","measured_step_time_s":0.011076958,"measured_world":2}}','sliced: measured tp1-pp1-dp2-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0 on 2 ranks (0.01108 s/step), plus 4.45e-05 s of exposed DP communication for dp 4 from the performance model','/tmp/fx/trials/tiny-w4-4a864f6e/n0-2/output.log','local','vm','0.1.0','07e6577a5ec0-dirty','vm',19293,'2026-11-23T20:03:28Z','2026-11-23T20:03:29Z','2026-11-23T20:03:29Z','2026-11-23T20:03:29Z');
INSERT INTO trials VALUES('9398e629a1956254','n0',4,'tp1-pp1-dp2-mbs2-nmb2-fp16-zero1-rcnone-sp0-vpp1-fa1',1,1,2,2,2,'fp16',1,'none',0,1,1,'running',1,NULL,NULL,NULL,NULL,NULL,0.0024147363221581068411,106015.71594003554491,203558656.0,'{"pgid":4242}','','/tmp/fx/trials/tiny-w2-9398e629/n0-3/output.log','command','vm','0.1.0','07e6577a5ec0-dirty','gone-host',99999,'2026-11-23T20:03:28Z','','2026-11-23T20:03:28Z','2026-11-23T20:03:28Z');
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
