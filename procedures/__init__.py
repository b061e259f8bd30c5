"""The named operations of the Hire API, one module (or package) per resource, and the business vocabulary;
`procedures.assembly` hands them to the framework."""
