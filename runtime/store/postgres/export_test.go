package postgres

// PendingCallQueries maps each query for pending calls to arguments for it,
// written as SQL literals, for TestPendingCallQueriesUseThePartialIndexes.
var PendingCallQueries = map[string]string{
	pendingCallsSQL:           `'t'`,
	callsInPendingStateSQL:    `'new'`,
	dueCallsSQL:               `now()`,
	nextDeadlineSQL:           ``,
	uncheckedCallsSQL:         `now(), 'builtin', 10`,
	oldestPendingCallsSQL:     `now(), '', '', 10`,
	oldestUserPendingCallsSQL: `now(), '', '', 10, 'u'`,
}

// Migrations is the package's list of migrations, for the test that
// upgrades a database from an earlier version.
var Migrations = migrations
