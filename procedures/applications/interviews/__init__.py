"""Interviews: a time with interviewers for one application, its invitations that calendars understand, the
private calendar feed, and the reminders of scorecards owed (docs/interviews.md)."""
