// Package pylambda evaluates the Python lambda expressions of ScienceBoard
// task files with a sandboxed Starlark interpreter.
package pylambda
