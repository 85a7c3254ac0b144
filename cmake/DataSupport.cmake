# What lib/data needs beyond its sources, for every build that compiles them (the engine's and
# the fuzz targets'): the demo corpus that data/demo_corpus.cpp embeds, the SentencePiece
# module that data/sentencepiece_tokenizer.cpp loads, and libpng and libjpeg(-turbo), which
# data/png_decode.cpp and data/jpeg_decode.cpp decode images with.
#
# SentencePiece: Debian's libsentencepiece exports the protobuf-lite it bundles, which clashes
# with LibTorch's libprotobuf, so only a module links it; xtrain loads the module on first use
# (data/sentencepiece_backend.h), from beside the executable or from this build folder.
function(xtrain_data_support target)
  set(data_dir ${CMAKE_SOURCE_DIR}/lib/data)
  set_property(SOURCE ${data_dir}/demo_corpus.cpp TARGET_DIRECTORY ${target} APPEND PROPERTY
    OBJECT_DEPENDS ${CMAKE_SOURCE_DIR}/data/demo/corpus.txt)
  target_compile_definitions(${target} PRIVATE XTRAIN_DEMO_CORPUS="${CMAKE_SOURCE_DIR}/data/demo/corpus.txt")

  find_package(PkgConfig REQUIRED)
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc)
  target_link_libraries(${target} PUBLIC PkgConfig::PCRE2 PkgConfig::ICU ${CMAKE_DL_LIBS})

  # Images. jpeglib.h defines macros with common names (GLOBAL, LOCAL, EXTERN), so the two files
  # that include the C headers stay out of the unity batches, where they would leak into others.
  find_package(PNG REQUIRED)
  find_package(JPEG REQUIRED)
  target_link_libraries(${target} PRIVATE PNG::PNG JPEG::JPEG)
  set_property(SOURCE ${data_dir}/png_decode.cpp ${data_dir}/jpeg_decode.cpp TARGET_DIRECTORY ${target}
    PROPERTY SKIP_UNITY_BUILD_INCLUSION ON)

  find_library(SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
  add_library(xtrain_sentencepiece MODULE ${data_dir}/sentencepiece_module/sentencepiece_module.cpp)
  target_include_directories(xtrain_sentencepiece PRIVATE ${CMAKE_SOURCE_DIR}/lib ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(xtrain_sentencepiece PRIVATE ${SENTENCEPIECE_LIBRARY})
  target_compile_options(xtrain_sentencepiece PRIVATE -Wall -Wextra)
  set_target_properties(xtrain_sentencepiece PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  add_dependencies(${target} xtrain_sentencepiece)
  target_compile_definitions(${target} PRIVATE XTRAIN_SENTENCEPIECE_MODULE="$<TARGET_FILE:xtrain_sentencepiece>")
endfunction()
