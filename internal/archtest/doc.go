// Package archtest holds the tests of the module's package structure:
// which way imports may point between gorap's packages, and the package
// map in docs/packages.md, generated from the packages' own doc comments
// and imports. It has no code of its own.
package archtest
