# Embeds every configs/<kind>/<name>.toml into the tunepar binary, so the presets work from any
# directory after the build. Regenerated whenever a config file changes.
file(GLOB TUNEPAR_CONFIG_FILES CONFIGURE_DEPENDS
  ${CMAKE_SOURCE_DIR}/configs/models/*.toml
  ${CMAKE_SOURCE_DIR}/configs/hardware/*.toml
  ${CMAKE_SOURCE_DIR}/configs/spaces/*.toml)
list(SORT TUNEPAR_CONFIG_FILES)
set(TUNEPAR_PRESETS_CC ${CMAKE_BINARY_DIR}/generated/embedded_presets.cc)
add_custom_command(
  OUTPUT ${TUNEPAR_PRESETS_CC}
  COMMAND ${CMAKE_COMMAND}
          -DOUTPUT=${TUNEPAR_PRESETS_CC}
          -DCONFIG_DIR=${CMAKE_SOURCE_DIR}/configs
          -P ${CMAKE_SOURCE_DIR}/cmake/WriteEmbeddedPresets.cmake
  DEPENDS ${TUNEPAR_CONFIG_FILES} ${CMAKE_SOURCE_DIR}/cmake/WriteEmbeddedPresets.cmake
  COMMENT "Embedding configs/ presets"
  VERBATIM)
