"""Per-tenant datastore backups (docs/backups.md): the objects (``objects``), the S3 target
(``target``) and their registration (``deploy``)."""
