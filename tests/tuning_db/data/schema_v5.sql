-- A tuning database of schema version 5, written by the tuning_db code of that version (a
-- finished run of three records, one of them failed, and the final timing run after it:
-- two records and its anchor's GFLOP/s) and dumped with sqlite3's iterdump.
BEGIN TRANSACTION;
CREATE TABLE meta (
	"key" VARCHAR NOT NULL, 
	value TEXT NOT NULL, 
	CONSTRAINT pk_meta PRIMARY KEY ("key")
);
INSERT INTO "meta" VALUES('schema_version','5');
CREATE TABLE records (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	workload_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	trial INTEGER NOT NULL, 
	config TEXT NOT NULL, 
	config_hash VARCHAR(64) NOT NULL, 
	status VARCHAR(16) NOT NULL, 
	costs TEXT NOT NULL, 
	median_s DOUBLE, 
	spread DOUBLE, 
	gflops DOUBLE, 
	build_s DOUBLE NOT NULL, 
	run_s DOUBLE NOT NULL, 
	error TEXT, 
	created_at DATETIME NOT NULL, 
	tool_version VARCHAR NOT NULL, 
	CONSTRAINT pk_records PRIMARY KEY (id), 
	CONSTRAINT ck_records_status CHECK (status IN ('ok', 'compile_error', 'runtime_error', 'wrong_answer', 'timeout', 'invalid', 'worker_lost')), 
	CONSTRAINT fk_records_run_id_tuning_runs FOREIGN KEY(run_id) REFERENCES tuning_runs (id), 
	CONSTRAINT fk_records_workload_id_workloads FOREIGN KEY(workload_id) REFERENCES workloads (id), 
	CONSTRAINT fk_records_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id)
);
INSERT INTO "records" VALUES(1,1,1,1,0,'{"order":"ijk","tile":[1,8],"trial":0}','99fc17fe28a95a15','ok','[0.00099,0.001,0.00102]',0.001,0.03,0.524288,0.25,0.05,NULL,'2025-01-01 12:00:00.000000','0.1.0');
INSERT INTO "records" VALUES(2,1,1,1,1,'{"order":"ijk","tile":[2,8],"trial":1}','f6e2fe541d0f02eb','compile_error','[]',NULL,NULL,NULL,0.25,0.0,'compile_error in trial 1','2025-01-01 12:00:01.000001','0.1.0');
INSERT INTO "records" VALUES(3,1,1,1,2,'{"order":"ijk","tile":[3,8],"trial":2}','e6f08c4bf4ac6fed','ok','[0.0009919800000000002,0.001002,0.00102204]',0.001002,0.03,5.23241516966067798932e-01,0.25,0.05,NULL,'2025-01-01 12:00:02.000002','0.1.0');
INSERT INTO "records" VALUES(4,2,1,1,10,'{"order":"ijk","tile":[4,8],"trial":10}','21bba53064c7b2b0','ok','[0.0009999,0.00101,0.0010302]',0.00101,0.03,5.19097029702970225173e-01,0.25,0.05,NULL,'2025-01-01 12:00:10.000010','0.1.0');
INSERT INTO "records" VALUES(5,2,1,1,11,'{"order":"ijk","tile":[5,8],"trial":11}','deca86d7e5f4c9d2','ok','[0.00100089,0.001011,0.00103122]',0.001011,0.03,5.18583580613254269131e-01,0.25,0.05,NULL,'2025-01-01 12:00:11.000011','0.1.0');
CREATE TABLE targets (
	id INTEGER NOT NULL, 
	kind VARCHAR(16) NOT NULL, 
	device VARCHAR NOT NULL, 
	compiler VARCHAR NOT NULL, 
	flags VARCHAR NOT NULL, 
	host VARCHAR NOT NULL, 
	CONSTRAINT pk_targets PRIMARY KEY (id), 
	CONSTRAINT uq_targets_kind_device_compiler_flags_host UNIQUE (kind, device, compiler, flags, host)
);
INSERT INTO "targets" VALUES(1,'cpu','Intel Xeon Gold 6348','gcc 12.2.0','-O3 -march=native','node1');
CREATE TABLE tuning_runs (
	id INTEGER NOT NULL, 
	workload_id INTEGER NOT NULL, 
	target_id INTEGER NOT NULL, 
	tuner VARCHAR NOT NULL, 
	seed INTEGER, 
	trials_requested INTEGER NOT NULL, 
	tool_version VARCHAR NOT NULL, 
	started_at DATETIME NOT NULL, 
	finished_at DATETIME, 
	status VARCHAR(16) NOT NULL, 
	pid INTEGER, 
	host VARCHAR, 
	heartbeat_at DATETIME, 
	resumed_from INTEGER, 
	baseline_gflops DOUBLE, 
	anchor_gflops DOUBLE, 
	CONSTRAINT pk_tuning_runs PRIMARY KEY (id), 
	CONSTRAINT ck_tuning_runs_status CHECK (status IN ('running', 'finished', 'interrupted')), 
	CONSTRAINT fk_tuning_runs_workload_id_workloads FOREIGN KEY(workload_id) REFERENCES workloads (id), 
	CONSTRAINT fk_tuning_runs_target_id_targets FOREIGN KEY(target_id) REFERENCES targets (id)
);
INSERT INTO "tuning_runs" VALUES(1,1,1,'xgb',0,100,'0.1.0','2025-01-01 12:00:00.000000','2025-01-01 12:00:02.000000','finished',4242,'oldhost','2025-01-01 12:00:01.000000',NULL,NULL,NULL);
INSERT INTO "tuning_runs" VALUES(2,1,1,'final',NULL,2,'0.1.0','2025-01-01 12:00:03.000000','2025-01-01 12:00:05.000000','finished',4242,'oldhost','2025-01-01 12:00:04.000000',NULL,NULL,0.25);
CREATE TABLE workloads (
	id INTEGER NOT NULL, 
	"key" VARCHAR NOT NULL, 
	name VARCHAR NOT NULL, 
	params TEXT NOT NULL, 
	dag_json TEXT, 
	dag_hash VARCHAR(16), 
	dag_stored_at DATETIME, 
	CONSTRAINT pk_workloads PRIMARY KEY (id), 
	CONSTRAINT uq_workloads_key UNIQUE ("key")
);
INSERT INTO "workloads" VALUES(1,'matmul{"K":64,"M":64,"N":64,"dtype":"float32"}','matmul','{"K":64,"M":64,"N":64,"dtype":"float32"}',NULL,NULL,NULL);
CREATE INDEX ix_workloads_name ON workloads (name);
CREATE INDEX ix_tuning_runs_workload_id_target_id ON tuning_runs (workload_id, target_id);
CREATE INDEX ix_records_workload_id_target_id_status_median_s ON records (workload_id, target_id, status, median_s);
CREATE INDEX ix_records_run_id_trial ON records (run_id, trial);
CREATE INDEX ix_records_workload_id_target_id_config_hash ON records (workload_id, target_id, config_hash);
COMMIT;
