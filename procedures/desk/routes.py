"""Every address of the desk, under the panel's `/panel`. State changes are POSTs; a GET that leads to one that
cannot be undone (closing a job, rejecting, cancelling an interview or an offer) is a page that asks to confirm."""

from __future__ import annotations

from starlette.routing import Route

from procedures.desk import application, decisions, interviews, job, jobs, offers, scorecards

GET, POST = ["GET"], ["POST"]

routes = [
    Route("/panel/jobs", jobs.jobs_page, methods=GET),
    Route("/panel/jobs", jobs.create, methods=POST),
    Route("/panel/jobs/new", jobs.new_job_page, methods=GET),
    Route("/panel/jobs/{id}", job.job_page, methods=GET),
    Route("/panel/jobs/{id}", job.save, methods=POST),
    Route("/panel/jobs/{id}/publish", job.publish, methods=POST),
    Route("/panel/jobs/{id}/close", job.confirm_close, methods=GET),
    Route("/panel/jobs/{id}/close", job.close, methods=POST),
    Route("/panel/applications/{id}", application.application_page, methods=GET),
    Route("/panel/applications/{id}/review", decisions.save_review, methods=POST),
    Route("/panel/applications/{id}/move", decisions.move, methods=POST),
    Route("/panel/applications/{id}/reject", decisions.confirm_reject, methods=GET),
    Route("/panel/applications/{id}/reject", decisions.reject, methods=POST),
    Route("/panel/applications/{id}/interviews", interviews.schedule, methods=POST),
    Route("/panel/applications/{id}/offers", offers.create, methods=POST),
    Route("/panel/files/{id}", decisions.download, methods=GET),
    Route("/panel/interviews/{id}", interviews.edit_page, methods=GET),
    Route("/panel/interviews/{id}", interviews.save, methods=POST),
    Route("/panel/interviews/{id}/cancel", interviews.confirm_cancel, methods=GET),
    Route("/panel/interviews/{id}/cancel", interviews.cancel, methods=POST),
    Route("/panel/interviews/{id}/scorecard", scorecards.submit_scorecard, methods=POST),
    Route("/panel/offers/{id}/approve", offers.approve, methods=POST),
    Route("/panel/offers/{id}/send", offers.send, methods=POST),
    Route("/panel/offers/{id}/cancel", offers.confirm_cancel, methods=GET),
    Route("/panel/offers/{id}/cancel", offers.cancel, methods=POST),
]
