"""Offers: terms in versions, approved in order, sent to the candidate, answered on their home page or by API
(docs/interviews.md)."""
