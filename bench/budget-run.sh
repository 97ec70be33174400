#!/bin/sh
# Runs UnfinishedBudgetTest (all three transports) in a plain JVM with JUnit,
# for load settings the gradle test task does not pass on:
#   bench/budget-run.sh [-Dtest.budgetDefaults=true] [-Dtest.budgetSenders=N] [-Dtest.budgetMessages=N] [-Dtest.budgetSendTimeoutMs=MS]
# Needs `gradle testClasses testClasspathFile` and the native library (target/release).
# OLD_CLASSES=dir runs the test against other main classes (a before measurement:
# javac --release 17 of an older java/src/main/java into dir).
cd "$(dirname "$0")/.." || exit 1
CP=$(cat build/test-classpath.txt)
if [ -n "$OLD_CLASSES" ]; then CP=$(echo "$CP" | sed "s#$PWD/build/classes/java/main#$OLD_CLASSES#"); fi
exec java -Xmx10g -Djava.library.path="$PWD/target/release" "$@" -cp "$CP" org.junit.runner.JUnitCore io.ibdxnet.UnfinishedBudgetTest
