// Package migrations holds the PostgreSQL schema of the projection as
// golang-migrate migrations (NNNN_title.up.sql / .down.sql, embedded in
// [FS]) and applies them: [Up] migrates a database to the latest version
// (already up to date is success), each migration in one transaction
// with the version it leaves, under golang-migrate's advisory lock (a
// migrator killed midway leaves the version before, never a dirty one),
// [Version] reports where a database
// stands, [Latest] is the newest version shipped. Schema changes happen
// only here; every table and column carries a COMMENT, so `\d+ table` in
// psql documents it. Databases are named by postgres:// (or
// postgresql://) URLs; the migrate driver used is pgx v5. Errors wrap
// [ErrMigrate], [ErrDirty], [ErrRoles] or [ErrNotOwner] (match with
// errors.Is).
//
// The rights of each role of the database ([RoleOwner], [RoleProjector],
// [RoleAPI], [RoleReporting]) are granted here too (0008_roles), so an
// upgraded database has exactly a fresh one's; a migration that adds a
// table grants its rights in the same file.
package migrations
