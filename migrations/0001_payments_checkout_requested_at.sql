-- billing.subscriptions.create asks the payment provider outside any transaction: the payment records that
-- its checkout is waiting on the provider, so that an account has at most two waiting at once.
ALTER TABLE payments ADD COLUMN IF NOT EXISTS checkout_requested_at timestamptz(0);
