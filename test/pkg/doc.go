// Package pkg tests the .deb and .rpm that `make package` builds
// (packaging/): lintian, the file lists of both formats, reproducible
// builds, and, with the build tag "integration" inside the sandbox, the
// whole life of the Debian package: dpkg -i, the agent under systemctl, a
// job, an agent restart that leaves the task alone, and apt-get purge.
package pkg
