ALTER TABLE "queues" ADD COLUMN "application_name" TEXT DEFAULT NULL;
