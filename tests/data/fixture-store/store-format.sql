-- store-format.sql: s/shards/store-format.sqlite as tunepar (cd78308ae652) wrote it (make-fixture.sh)
PRAGMA application_id = 1953853029;
PRAGMA user_version = 5;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
COMMIT;
