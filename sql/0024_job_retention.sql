-- The hourly retention purge (JOB_RETENTION_DAYS) finds finished jobs by when they ended; queued and
-- running ones are jobs_due_idx's.
CREATE INDEX IF NOT EXISTS jobs_finished_idx ON jobs (finished_at)
  WHERE state IN ('succeeded', 'failed', 'cancelled');
