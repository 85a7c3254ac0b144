# What lib/data needs beyond its sources, for every build that compiles them (the engine's and
# the fuzz targets'): the demo corpus that data/sources/demo_corpus.cpp embeds.
function(xtrain_data_support target)
  set(data_dir ${CMAKE_SOURCE_DIR}/lib/data)
  set_property(SOURCE ${data_dir}/demo_corpus.cpp TARGET_DIRECTORY ${target} APPEND PROPERTY
    OBJECT_DEPENDS ${CMAKE_SOURCE_DIR}/data/demo/corpus.txt)
  target_compile_definitions(${target} PRIVATE XTRAIN_DEMO_CORPUS="${CMAKE_SOURCE_DIR}/data/demo/corpus.txt")
endfunction()
