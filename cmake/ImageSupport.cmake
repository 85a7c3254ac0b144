# What lib/image needs beyond its sources: libpng and libjpeg(-turbo), which
# image/png_decode.cpp and image/jpeg_decode.cpp decode images with.
function(xtrain_image_support target)
  set(image_dir ${CMAKE_SOURCE_DIR}/lib/image)
  find_package(PNG REQUIRED)
  find_package(JPEG REQUIRED)
  target_link_libraries(${target} PRIVATE PNG::PNG JPEG::JPEG)
  # jpeglib.h defines macros with common names (GLOBAL, LOCAL, EXTERN), so the two files that
  # include the C headers stay out of the unity batches, where they would leak into others.
  set_property(SOURCE ${image_dir}/png_decode.cpp ${image_dir}/jpeg_decode.cpp TARGET_DIRECTORY ${target}
    PROPERTY SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
