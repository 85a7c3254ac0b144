# What lib/text (the tokenizers) needs beyond its sources: PCRE2 for the pre-tokenizer regexes,
# ICU for the normalizers, and the SentencePiece module that text/sentencepiece_tokenizer.cpp
# loads.
#
# SentencePiece: Debian's libsentencepiece exports the protobuf-lite it bundles, which clashes
# with LibTorch's libprotobuf, so only a module links it; xtrain loads the module on first use
# (text/sentencepiece_module/sentencepiece_backend.h, the interface it exports), from beside the
# executable or from this build folder.
function(xtrain_text_support target)
  set(text_dir ${CMAKE_SOURCE_DIR}/lib/text)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
  pkg_check_modules(ICU REQUIRED IMPORTED_TARGET icu-uc)
  target_link_libraries(${target} PUBLIC PkgConfig::PCRE2 PkgConfig::ICU ${CMAKE_DL_LIBS})

  find_library(SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
  add_library(xtrain_sentencepiece MODULE ${text_dir}/sentencepiece_module/sentencepiece_module.cpp)
  target_include_directories(xtrain_sentencepiece PRIVATE ${CMAKE_SOURCE_DIR}/lib ${SENTENCEPIECE_INCLUDE_DIR})
  target_link_libraries(xtrain_sentencepiece PRIVATE ${SENTENCEPIECE_LIBRARY})
  target_compile_options(xtrain_sentencepiece PRIVATE -Wall -Wextra)
  set_target_properties(xtrain_sentencepiece PROPERTIES PREFIX "" LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  add_dependencies(${target} xtrain_sentencepiece)
  target_compile_definitions(${target} PRIVATE XTRAIN_SENTENCEPIECE_MODULE="$<TARGET_FILE:xtrain_sentencepiece>")
endfunction()
