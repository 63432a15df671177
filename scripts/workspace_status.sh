#!/bin/sh
# Bazel's workspace status (.bazelrc: --workspace_status_command): the
# commit the build's sources are, for records that name what measured them
# (`mixrt bench`'s machine record). "-dirty" when tracked files differ from
# it; "unknown" without git or a repository. Bounded: a wedged git never
# holds a build.
commit=$(timeout 5 git rev-parse HEAD 2>/dev/null) || commit=unknown
case "$commit" in
  [0-9a-f]*) ;;
  *) commit=unknown ;;
esac
if [ "$commit" != unknown ] && ! timeout 5 git diff --quiet HEAD -- 2>/dev/null; then
  commit="$commit-dirty"
fi
echo "STABLE_MIXRT_COMMIT $commit"
