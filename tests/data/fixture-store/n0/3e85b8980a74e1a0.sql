-- 3e85b8980a74e1a0.sql: s/shards/n0/3e85b8980a74e1a0.sqlite as tunepar (cd78308ae652) wrote it (make-fixture.sh)
PRAGMA application_id = 1953853029;
PRAGMA user_version = 5;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('node_id','n0');
INSERT INTO meta VALUES('study_id','3e85b8980a74e1a0');
INSERT INTO meta VALUES('publish_seq','2');
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
INSERT INTO studies VALUES('3e85b8980a74e1a0','fixture-small-megatron',16,'small','dgx-h100','megatron',replace('# A small GPT for the built-in core''s benchmarks and calibration sweeps; the same shape as the\n# PyTorch CPU reference in reference/peers.md (4 layers, hidden 256, 8 heads, seq 128, V 1024).\nname = "small"\ndescription = "built-in core benchmarks, calibration"\nlayers = 4\nhidden = 256\nheads = 8\nseq_len = 128\nvocab = 1024\nglobal_batch = 8\n','\n',char(10)),replace('# NVIDIA DGX H100: 8 H100 80GB SXM with NVLink4/NVSwitch, 8 NDR InfiniBand NICs (one per GPU).\n# Figures from reference/hardware.md.\nname = "dgx-h100"\ndescription = "NVIDIA DGX H100 80GB: 8 GPUs, NVSwitch, 8 x NDR 400 Gb/s"\n\n[device]\nname = "NVIDIA H100 80GB SXM"\npeak_tflops_bf16 = { value = 989, origin = "published", source = "NVIDIA H100 SXM datasheet: BF16 tensor, dense" }\npeak_tflops_fp16 = { value = 989, origin = "published", source = "NVIDIA H100 SXM datasheet: FP16 tensor, dense" }\npeak_tflops_fp32 = { value = 67, origin = "published", source = "NVIDIA H100 SXM datasheet: FP32 (non-tensor)" }\nmemory_gb = { value = 80, origin = "published", source = "NVIDIA H100 SXM datasheet" }\nmemory_bandwidth_gbs = { value = 3350, origin = "published", source = "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3" }\n\n[node]\ngpus_per_node = { value = 8, origin = "published", source = "DGX H100 system" }\nintra_node_bandwidth_gbs = { value = 450, origin = "published", source = "NVLink4: 900 GB/s per GPU, 450 per direction (one user measured ~380)" }\nnics_per_node = { value = 8, origin = "published", source = "DGX H100: 8 x NDR InfiniBand, one per GPU" }\nnic_bandwidth_gbs = { value = 50, origin = "published", source = "NDR InfiniBand 400 Gb/s = 50 GB/s per direction" }\n\n[efficiency]\n# The performance model''s efficiency parameters (tunepar calibrate fits them to measured runs).\ngemm_efficiency = { value = 0.7, origin = "assumed", source = "cuBLAS large bf16 GEMMs on H100 SXM: ~70% of dense peak" }\ngemm_half_size = { value = 256, origin = "assumed", source = "larger tiles than A100: thin shapes lose more" }\nflash_efficiency = { value = 0.45, origin = "assumed", source = "FlashAttention-2 on H100: ~35-50% of peak" }\nmemory_efficiency = { value = 0.8, origin = "assumed", source = "element-wise kernels reach ~80% of HBM bandwidth" }\nkernel_overhead_us = { value = 40, origin = "assumed", source = "~10 kernel launches per layer forward at ~4 us" }\nlink_efficiency = { value = 0.75, origin = "assumed", source = "NCCL all-reduce bus bandwidth ~75% of NVLink" }\nlink_latency_us = { value = 5, origin = "assumed", source = "NCCL intra-node step latency" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "NCCL over InfiniBand ~80% of line rate" }\nnetwork_latency_us = { value = 10, origin = "assumed", source = "InfiniBand + NCCL step latency" }\ndp_overlap = { value = 0.5, origin = "assumed", source = "current frameworks overlap gradient reduction with backward" }\nmemory_overhead_gb = { value = 2.5, origin = "assumed", source = "CUDA context, NCCL buffers, allocator reserve" }\nmemory_fragmentation = { value = 0.1, origin = "assumed", source = "PyTorch caching allocator" }\n\n[launch]\nvisible_devices_env = "CUDA_VISIBLE_DEVICES"\ncpus_per_task = 14  # 112 cores / 8 GPUs\nmpi = "pmix"\n# No cpu_masks: read the GPU-to-NUMA map with `nvidia-smi topo -m` and add one per local rank.\n','\n',char(10)),replace('description = ''Megatron-LM Table 1 settings (fp16, full recompute)''\nname = ''megatron''\n\n[constraints]\ntp_cross_node = false\n\n[knobs]\nmicro_batch = [ 1 ]\npp = ''divisors''\nprecision = [ ''bf16'' ]\nrecompute = [ ''selective'' ]\ntp = [ 1, 2, 4, 8 ]\nvirtual_stages = [ 1, 2, 3, 4, 5 ]','\n',char(10)),'max_tokens_per_s','model','{"performance_model":"roofline-v1"}','2026-11-28T05:35:45Z','n0',0,'logei','',3611012330222636616);
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
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',1,'tp1-pp2-dp8-mbs1-nmb1-bf16-zero0-rcselective-sp0-vpp1-fa0',1,2,8,1,1,'bf16',0,'selective',0,1,0,'ok',1,0.0006335060785219073353,1616401.2228409722446,2.2245818813422251203,2536597145.5999999045,0.0006335060785219073353,0.0006335060785219073353,1616401.2228409722446,2536597145.5999999045,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-1122630893118790419,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',2,'tp1-pp4-dp4-mbs1-nmb2-bf16-zero0-rcselective-sp0-vpp1-fa0',1,4,4,1,2,'bf16',0,'selective',0,1,0,'ok',1,0.00076976974900957995367,1330267.9162405694369,1.8307892013335811398,2522101606.4000000953,0.00076976974900957995367,0.00076976974900957995367,1330267.9162405694369,2522101606.4000000953,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,233093069947040641,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',3,'tp2-pp1-dp8-mbs1-nmb1-bf16-zero0-rcselective-sp0-vpp1-fa0',2,1,8,1,1,'bf16',0,'selective',0,1,0,'ok',1,0.00071496609416421498441,1432235.7498603358399,1.9711230441597864526,2535096576.0,0.00071496609416421498441,0.00071496609416421498441,1432235.7498603358399,2535096576.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-8196497579921665203,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',4,'tp2-pp2-dp4-mbs1-nmb2-bf16-zero0-rcselective-sp0-vpp1-fa0',2,2,4,1,2,'bf16',0,'selective',0,1,0,'ok',1,0.001196043081775196356,856156.45088649669196,1.1782904524712463079,2520486246.4000000953,0.001196043081775196356,0.001196043081775196356,856156.45088649669196,2520486246.4000000953,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-1667560385550693114,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',5,'tp2-pp2-dp4-mbs1-nmb2-bf16-zero0-rcselective-sp0-vpp2-fa0',2,2,4,1,2,'bf16',0,'selective',0,2,0,'ok',1,0.0010583349183947532261,967557.60601111862346,1.3316069606184379736,2521344768.0,0.0010583349183947532261,0.0010583349183947532261,967557.60601111862346,2521344768.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,7390396667307253829,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',6,'tp2-pp4-dp2-mbs1-nmb4-bf16-zero0-rcselective-sp0-vpp1-fa0',2,4,2,1,4,'bf16',0,'selective',0,1,0,'ok',1,0.0014873881606295895688,688455.12362190370912,0.94749049461538659144,2513369190.4000000953,0.0014873881606295895688,0.0014873881606295895688,688455.12362190370912,2513369190.4000000953,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,6522810160163301761,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',7,'tp4-pp1-dp4-mbs1-nmb2-bf16-zero0-rcselective-sp0-vpp1-fa0',4,1,4,1,2,'bf16',0,'selective',0,1,0,'ok',1,0.0021448948855506758115,477412.67271337652347,0.65704205529782067074,2518647552.0,0.0021448948855506758115,0.0021448948855506758115,477412.67271337652347,2518647552.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,4704518190019164370,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',8,'tp4-pp2-dp2-mbs1-nmb4-bf16-zero0-rcselective-sp0-vpp1-fa0',4,2,2,1,4,'bf16',0,'selective',0,1,0,'ok',1,0.0030304980137482932615,337898.25809305126312,0.46503450509011035052,2511314739.1999998093,0.0030304980137482932615,0.0030304980137482932615,337898.25809305126312,2511314739.1999998093,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-2388751836704332701,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',9,'tp4-pp2-dp2-mbs1-nmb4-bf16-zero0-rcselective-sp0-vpp2-fa0',4,2,2,1,4,'bf16',0,'selective',0,2,0,'ok',1,0.0028244179270003294361,362552.57772263832158,0.49896516040624738774,2511924224.0,0.0028244179270003294361,0.0028244179270003294361,362552.57772263832158,2511924224.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,5780751931640943611,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',10,'tp4-pp4-dp1-mbs1-nmb8-bf16-zero0-rcselective-sp0-vpp1-fa0',4,4,1,1,8,'bf16',0,'selective',0,1,0,'ok',1,0.0038228269961193819467,267864.59367360337636,0.36865025423085867606,2507744691.1999998091,0.0038228269961193819467,0.0038228269961193819467,267864.59367360337636,2507744691.1999998091,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-1098181444870278951,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',11,'tp8-pp1-dp2-mbs1-nmb4-bf16-zero0-rcselective-sp0-vpp1-fa0',8,1,2,1,4,'bf16',0,'selective',0,1,0,'ok',1,0.0050209993936967322811,203943.46218912317999,0.28067841349855393584,2510423040.0,0.0050209993936967322811,0.0050209993936967322811,203943.46218912317999,2510423040.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,6480629515669659308,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',12,'tp8-pp2-dp1-mbs1-nmb8-bf16-zero0-rcselective-sp0-vpp1-fa0',8,2,1,1,8,'bf16',0,'selective',0,1,0,'ok',1,0.0063940983404277467253,160147.67766795051284,0.22040420227658288898,2506728985.5999999046,0.0063940983404277467253,0.0063940983404277467253,160147.67766795051284,2506728985.5999999046,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-8536369204503366427,'first','');
INSERT INTO trials VALUES('3e85b8980a74e1a0','n0',13,'tp8-pp2-dp1-mbs1-nmb8-bf16-zero0-rcselective-sp0-vpp2-fa0',8,2,1,1,8,'bf16',0,'selective',0,2,0,'ok',1,0.0062138322919960227094,164793.63328151043969,0.22679822656547843351,2507213952.0,0.0062138322919960227094,0.0062138322919960227094,164793.63328151043969,2507213952.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8813,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,6904979587610703201,'first','');
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
