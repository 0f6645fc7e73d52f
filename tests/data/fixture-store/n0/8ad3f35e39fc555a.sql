-- 8ad3f35e39fc555a.sql: s/shards/n0/8ad3f35e39fc555a.sqlite as tunepar (cd78308ae652) wrote it (make-fixture.sh)
PRAGMA application_id = 1953853029;
PRAGMA user_version = 5;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('node_id','n0');
INSERT INTO meta VALUES('study_id','8ad3f35e39fc555a');
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
INSERT INTO studies VALUES('8ad3f35e39fc555a','tiny-w8-8ad3f35e',8,'tiny','dgx-a100','default',replace('# A model small enough for exactness tests of the built-in core (tunepar-core) on a laptop.\nname = "tiny"\ndescription = "built-in core exactness tests"\nlayers = 4\nhidden = 64\nheads = 4\nseq_len = 32\nvocab = 256\nglobal_batch = 8\n','\n',char(10)),replace('# NVIDIA DGX A100 (e.g. Selene, the machine of Megatron-LM''s Table 1): 8 A100 80GB SXM with\n# NVLink3/NVSwitch, 8 HDR InfiniBand NICs (one per GPU). Figures from reference/hardware.md.\nname = "dgx-a100"\ndescription = "NVIDIA DGX A100 80GB: 8 GPUs, NVSwitch, 8 x HDR 200 Gb/s"\n\n[device]\nname = "NVIDIA A100 80GB SXM"\npeak_tflops_bf16 = { value = 312, origin = "published", source = "NVIDIA A100 datasheet: BF16 tensor, dense" }\npeak_tflops_fp16 = { value = 312, origin = "published", source = "NVIDIA A100 datasheet: FP16 tensor, dense" }\npeak_tflops_fp32 = { value = 19.5, origin = "published", source = "NVIDIA A100 datasheet: FP32 (TF32 tensor 156 is not IEEE fp32)" }\nmemory_gb = { value = 80, origin = "published", source = "NVIDIA A100 80GB datasheet" }\nmemory_bandwidth_gbs = { value = 2039, origin = "published", source = "NVIDIA A100 80GB SXM datasheet: 2,039 GB/s" }\n\n[node]\ngpus_per_node = { value = 8, origin = "published", source = "DGX A100 system" }\nintra_node_bandwidth_gbs = { value = 300, origin = "published", source = "NVLink3 + NVSwitch: 600 GB/s per GPU, 300 per direction" }\nnics_per_node = { value = 8, origin = "published", source = "DGX A100: 8 x HDR InfiniBand, one per GPU" }\nnic_bandwidth_gbs = { value = 25, origin = "published", source = "HDR InfiniBand 200 Gb/s = 25 GB/s per direction" }\n\n[efficiency]\n# tunepar calibrate on megatron_table1.csv (2026-11-22): 10 runs, mean |error| 2.9%, worst 5.2%\ngemm_efficiency = { value = 0.765624, origin = "fitted", source = "tunepar calibrate on megatron_table1.csv (2026-11-22): 10 runs, mean |error| 2.9%, worst 5.2%" }\ngemm_half_size = { value = 128, origin = "assumed", source = "128x128 tiles: thin shapes lose efficiency" }\nflash_efficiency = { value = 0.55, origin = "assumed", source = "FlashAttention-2 forward on A100: ~50-70% of peak (Dao 2023)" }\nmemory_efficiency = { value = 0.8, origin = "assumed", source = "element-wise kernels reach ~80% of HBM bandwidth" }\nkernel_overhead_us = { value = 40, origin = "assumed", source = "~10 kernel launches per layer forward at ~4 us" }\nlink_efficiency = { value = 0.824088, origin = "fitted", source = "tunepar calibrate on megatron_table1.csv (2026-11-22): 10 runs, mean |error| 2.9%, worst 5.2%" }\nlink_latency_us = { value = 5, origin = "assumed", source = "NCCL intra-node step latency" }\nnetwork_efficiency = { value = 0.8, origin = "assumed", source = "NCCL over InfiniBand ~80% of line rate" }\nnetwork_latency_us = { value = 10, origin = "assumed", source = "InfiniBand + NCCL step latency" }\ndp_overlap = { value = 0, origin = "assumed", source = "Megatron-LM 2021 reduced gradients after the backward pass" }\nmemory_overhead_gb = { value = 2.5, origin = "assumed", source = "CUDA context, NCCL buffers, allocator reserve" }\nmemory_fragmentation = { value = 0.1, origin = "assumed", source = "PyTorch caching allocator" }\n\n[calibration]\ndata = "megatron_table1.csv"\ndate = "2026-11-22"\nruns = 10\nfitted = ["gemm_efficiency", "link_efficiency"]\nmean_abs_error_pct = 2.94\nmax_abs_error_pct = 5.22\n\n[launch]\nvisible_devices_env = "CUDA_VISIBLE_DEVICES"\ncpus_per_task = 16  # 128 cores / 8 GPUs\nmpi = "pmix"\n# No cpu_masks: the GPU-to-NUMA map differs between DGX installations; read it with\n# `nvidia-smi topo -m` and add one mask per local rank here to enable CPU binding.\n','\n',char(10)),replace('description = ''every knob tunepar understands''\nname = ''default''\n\n[constraints]\ntp_cross_node = false\n\n[knobs]\nflash_attention = [ false, true ]\nmicro_batch = [ 1, 2 ]\npp = ''divisors''\nprecision = [ ''bf16'' ]\nrecompute = [ ''none'' ]\nseq_parallel = [ false ]\ntp = ''divisors''\nvirtual_stages = [ 1 ]\nzero = [ 1 ]','\n',char(10)),'max_tokens_per_s','model','{"performance_model":"roofline-v1"}','2026-11-28T05:35:45Z','n0',0,'logei','',-1007596265618421056);
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
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',1,'tp1-pp1-dp8-mbs1-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0',1,1,8,1,1,'bf16',1,'none',0,1,0,'ok',1,0.00052766884477152347591,485152.76680935372132,0.083461800779746728173,2502087360.0,0.00052766884477152347591,0.00052766884477152347591,485152.76680935372132,2502087360.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-8141800450805930930,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',2,'tp1-pp1-dp8-mbs1-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa1',1,1,8,1,1,'bf16',1,'none',0,1,1,'ok',1,0.00052719516795902109096,485588.66916606278391,0.083536789933976118849,2501997248.0,0.00052719516795902109096,0.00052719516795902109096,485588.66916606278391,2501997248.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-7593976943380946318,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',3,'tp1-pp2-dp4-mbs1-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa0',1,2,4,1,2,'bf16',1,'none',0,1,0,'ok',1,0.00079711221799263196931,321159.29755120916524,0.055249676276329609536,2501469132.8000001908,0.00079711221799263196931,0.00079711221799263196931,321159.29755120916524,2501469132.8000001908,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-959552963687750970,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',4,'tp1-pp2-dp4-mbs1-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa1',1,2,4,1,2,'bf16',1,'none',0,1,1,'ok',1,0.00079640170277387833767,321445.82201211823848,0.055298967652388723859,2501379020.8000001907,0.00079640170277387833767,0.00079640170277387833767,321445.82201211823848,2501379020.8000001907,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,5202577526438473793,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',5,'tp1-pp2-dp4-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0',1,2,4,2,1,'bf16',1,'none',0,1,0,'ok',1,0.00054773410736045334296,467380.06006905698451,0.080404326493800012953,2501568179.1999998093,0.00054773410736045334296,0.00054773410736045334296,467380.06006905698451,2501568179.1999998093,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-436110005502456155,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',6,'tp1-pp2-dp4-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa1',1,2,4,2,1,'bf16',1,'none',0,1,1,'ok',1,0.00054678675373544835622,468189.83497881219955,0.080543633691075033897,2501478067.1999998092,0.00054678675373544835622,0.00054678675373544835622,468189.83497881219955,2501478067.1999998092,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-6258339987799350919,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',7,'tp1-pp4-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa0',1,4,2,1,4,'bf16',1,'none',0,1,0,'ok',1,0.00095034556276893790514,269375.69872385729104,0.046341240202862607477,2501224908.8000001906,0.00095034556276893790514,0.00095034556276893790514,269375.69872385729104,2501224908.8000001906,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,9069303580499654921,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',8,'tp1-pp4-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa1',1,4,2,1,4,'bf16',1,'none',0,1,1,'ok',1,0.00094951662834705859595,269610.86552602134178,0.046381696418172503604,2501134796.8000001906,0.00094951662834705859595,0.00094951662834705859595,269610.86552602134178,2501134796.8000001906,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,1814634609211513797,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',9,'tp1-pp4-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa0',1,4,2,2,2,'bf16',1,'none',0,1,0,'ok',1,0.00069166075601349125915,370123.6448277059244,0.063673110866999907409,2501233100.8000001906,0.00069166075601349125915,0.00069166075601349125915,370123.6448277059244,2501233100.8000001906,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,516328007717311637,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',10,'tp1-pp4-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa1',1,4,2,2,2,'bf16',1,'none',0,1,1,'ok',1,0.00069047656398223513415,370758.42013167368714,0.063782312532092086398,2501142988.8000001908,0.00069047656398223513415,0.00069047656398223513415,370758.42013167368714,2501142988.8000001908,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,8235923216327316725,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',11,'tp2-pp1-dp4-mbs1-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa0',2,1,4,1,2,'bf16',1,'none',0,1,0,'ok',1,0.001376045243399785789,186040.3945494571817,0.032004901155132214896,2501272064.0,0.001376045243399785789,0.001376045243399785789,186040.3945494571817,2501272064.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-8866340931427129412,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',12,'tp2-pp1-dp4-mbs1-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa1',2,1,4,1,2,'bf16',1,'none',0,1,1,'ok',1,0.0013755715665872830788,186104.45738939038711,0.03201592201361160711,2501227008.0,0.0013755715665872830788,0.0013755715665872830788,186104.45738939038711,2501227008.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,8667770367975052231,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',13,'tp2-pp1-dp4-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa0',2,1,4,2,1,'bf16',1,'none',0,1,0,'ok',1,0.00070570285078931378319,362758.91434145317181,0.062406141551988876525,2501546496.0,0.00070570285078931378319,0.00070570285078931378319,362758.91434145317181,2501546496.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,5008475177545132664,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',14,'tp2-pp1-dp4-mbs2-nmb1-bf16-zero1-rcnone-sp0-vpp1-fa1',2,1,4,2,1,'bf16',1,'none',0,1,1,'ok',1,0.00070522917397681139824,363002.56632380542578,0.062448057489816896636,2501456384.0,0.00070522917397681139824,0.00070522917397681139824,363002.56632380542578,2501456384.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-3922674267835646992,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',15,'tp2-pp2-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa0',2,2,2,1,4,'bf16',1,'none',0,1,0,'ok',1,0.0018261469123090567044,140185.87347734408104,0.024116456186054457955,2500977254.4000000954,0.0018261469123090567044,0.0018261469123090567044,140185.87347734408104,2500977254.4000000954,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-3118124374448581456,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',16,'tp2-pp2-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa1',2,2,2,1,4,'bf16',1,'none',0,1,1,'ok',1,0.0018255548162934289672,140231.3410230964364,0.02412427805888532617,2500932198.4000000952,0.0018255548162934289672,0.0018255548162934289672,140231.3410230964364,2500932198.4000000952,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-3006559863962368187,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',17,'tp2-pp2-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa0',2,2,2,2,2,'bf16',1,'none',0,1,0,'ok',1,0.0011065238482837131198,231355.15822552927421,0.039800490579854255757,2501228748.8000001906,0.0011065238482837131198,0.0011065238482837131198,231355.15822552927421,2501228748.8000001906,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-2633023208276273933,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',18,'tp2-pp2-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa1',2,2,2,2,2,'bf16',1,'none',0,1,1,'ok',1,0.0011058133330649592713,231503.81022306019439,0.039826063480293494301,2501138636.8000001908,0.0011058133330649592713,0.0011058133330649592713,231503.81022306019439,2501138636.8000001908,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,8892471733234748153,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',19,'tp4-pp1-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa0',4,1,2,1,4,'bf16',1,'none',0,1,0,'ok',1,0.0042167075260510734555,60710.874163886532186,0.010444213104161728655,2500870144.0,0.0042167075260510734555,0.0042167075260510734555,60710.874163886532186,2500870144.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,-5119268484523190942,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',20,'tp4-pp1-dp2-mbs1-nmb4-bf16-zero1-rcnone-sp0-vpp1-fa1',4,1,2,1,4,'bf16',1,'none',0,1,1,'ok',1,0.0042162338492385707452,60717.694784939936652,0.0104453864692427862,2500847616.0,0.0042162338492385707452,0.0042162338492385707452,60717.694784939936652,2500847616.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,2401152426284107091,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',21,'tp4-pp1-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa0',4,1,2,2,2,'bf16',1,'none',0,1,0,'ok',1,0.0021163651334406012767,120962.11374632580555,0.020809354352007917998,2501054464.0,0.0021163651334406012767,0.0021163651334406012767,120962.11374632580555,2501054464.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,6990093292667548022,'first','');
INSERT INTO trials VALUES('8ad3f35e39fc555a','n0',22,'tp4-pp1-dp2-mbs2-nmb2-bf16-zero1-rcnone-sp0-vpp1-fa1',4,1,2,2,2,'bf16',1,'none',0,1,1,'ok',1,0.0021158914566280990002,120989.19308836550044,0.020814012865377692906,2501009408.0,0.0021158914566280990002,0.0021158914566280990002,120989.19308836550044,2501009408.0,'{}','predicted','','model','vm','0.1.0','cd78308ae652','vm',8812,'2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z','2026-11-28T05:35:45Z',0,'',NULL,0,0,5029048917860860344,'first','');
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
