# Writes OUTPUT: `#define SHOAL_GIT_COMMIT "<commit>"` for the repository at SOURCE_DIR, with "-dirty"
# when tracked files differ from that commit or untracked files are not ignored, or "" outside a git
# checkout. Run at every build (not at configure time), so figures recorded by shoal-perf name the commit
# that was built; the file is rewritten only when its text changes, so an unchanged commit rebuilds
# nothing. SHOAL_GIT_COMMIT in the environment overrides it, for a copy of a tree whose .git is not the one
# the tree was committed in.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  set(commit "")
endif()
if(DEFINED ENV{SHOAL_GIT_COMMIT})
  set(commit "$ENV{SHOAL_GIT_COMMIT}")
elseif(commit)
  # Dirty: tracked files differ, or files git does not ignore are untracked (a globbed source may be one).
  execute_process(COMMAND git status --porcelain --untracked-files=normal WORKING_DIRECTORY ${SOURCE_DIR}
    OUTPUT_VARIABLE changes RESULT_VARIABLE status_rc ERROR_QUIET)
  if(status_rc EQUAL 0 AND NOT changes STREQUAL "")
    string(APPEND commit "-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/write_git_commit.cmake.\n#define SHOAL_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
