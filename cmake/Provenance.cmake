# Generates provenance.cc with the version and the git revision of the source tree. The
# revision is refreshed at every build (not only at configure time) and the file is rewritten
# only when it changes, so unchanged trees do not relink.
set(TUNEPAR_PROVENANCE_CC ${CMAKE_BINARY_DIR}/generated/provenance.cc)
add_custom_target(tunepar_provenance_refresh
  BYPRODUCTS ${TUNEPAR_PROVENANCE_CC}
  COMMAND ${CMAKE_COMMAND}
          -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
          -DOUTPUT=${TUNEPAR_PROVENANCE_CC}
          -DVERSION=${PROJECT_VERSION}
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteProvenance.cmake
  COMMENT "Recording git revision"
  VERBATIM)
