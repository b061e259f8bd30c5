-- Delivery jobs have a queue of their own, claimed in batches by the delivery worker (rpc/outbox/claims.py);
-- procrastinate's worker keeps the `webhooks` queue for the periodic work. Jobs deferred before the change move
-- over, whether waiting or held by a worker (a stalled one is requeued in its new queue).
DO $$
BEGIN
    IF to_regclass('procrastinate_jobs') IS NOT NULL THEN
        UPDATE procrastinate_jobs SET queue_name = 'webhook_deliveries'
        WHERE task_name = 'hire.deliver_webhook' AND queue_name = 'webhooks';
    END IF;
END
$$;
