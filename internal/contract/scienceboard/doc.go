// Package scienceboard loads ScienceBoard benchmark task files.
//
// A task file is one JSON object per task, stored as tasks/<sort>/<App>/<ID>.json
// (for example tasks/VM/ChimeraX/A-01.json). The loader reads the top-level
// fields into [Task], types the initialisation items ([InitItem]) and the
// evaluation checks ([Check]) it understands, and keeps the raw JSON of every
// item so that nothing is lost. Items it cannot type are kept raw and described
// in [Task.Unsupported]; an unknown func or check type never fails a load.
//
// Errors are reported per file as [*FileError] (syntax errors carry line and
// column) or [*DuplicateIDError], joined with [errors.Join] so that every bad
// file is reported at once.
//
// The file format as we read it is documented in docs/tasks.md.
package scienceboard
