ALTER TABLE workflow_status ADD COLUMN "owner_xid" TEXT DEFAULT NULL;
