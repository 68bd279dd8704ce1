// Package archtest holds the tests of the module's structure: which way
// imports may point between gorap's packages, the package map in
// docs/packages.md (generated from the packages' own doc comments and
// imports), and the links between the Markdown documents. It has no code
// of its own.
package archtest
