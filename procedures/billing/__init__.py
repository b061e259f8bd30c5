"""Billing: plans, subscriptions, their payments through the provider (PayTR), and invoices.

    Subscription: pending → active → cancelled | expired;  pending → failed | cancelled
    Payment:      pending → completed | failed

`plans` lists the plans; `subscriptions` opens checkouts (asking the provider with no transaction open) and
cancels; `settlement` applies the provider's verified notices and ends unpaid periods; `provider` is PayTR
itself; `panel` is the Billing page. Every change is written with its event in one transaction.
"""
