"""The hiring desk: the panel's pages where an account's employers and admins publish jobs, read who applied, move
applications along, schedule interviews, submit scorecards and make offers, without writing code (docs/desk.md).

Every action is a form that works without JavaScript, behind the panel's sign-in and CSRF check, and calls the
procedure the API offers through its own code (`procedures.public_pages.calls`): the same rules, events, mail and
audit entries; a refusal is shown as the form's error. Lists grow with signed cursors, never offsets.
"""
